package main_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The owner's side of the crash test: the owner signs in to the console of
// the running server and approves or rejects the spends that wait for it,
// during the load (where a kill may cut a decision short) and right after
// each restart, on agents the restarted service reloads from disk.

const (
	crashOwnerEmail    = "crash@owner.invalid"
	crashOwnerPassword = "a long enough password"
)

// ownerConsole is the owner's browser: a cookie jar and the session's form
// token.
type ownerConsole struct {
	origin string // http://host:port of the server
	tr     *http.Transport
	client *http.Client
	csrf   string
}

var crashCSRFField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs the owner in to the console of the running server, through
// its forms as a browser would.
func (g *guardProcess) signIn(ctx context.Context) (*ownerConsole, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{DisableCompression: true}
	oc := &ownerConsole{origin: "http://" + g.addr, tr: tr, client: &http.Client{Jar: jar, Transport: tr,
		Timeout:       time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	token := func(path string) (string, error) {
		sc, page, err := oc.do(ctx, http.MethodGet, path, nil)
		if err != nil {
			return "", err
		}
		m := crashCSRFField.FindStringSubmatch(page)
		if sc != http.StatusOK || m == nil {
			return "", fmt.Errorf("console %s: HTTP %d without a form token: %s", path, sc, clipPage(page))
		}
		return m[1], nil
	}
	form, err := token("/console/signin")
	if err != nil {
		oc.close()
		return nil, err
	}
	sc, page, err := oc.do(ctx, http.MethodPost, "/console/signin",
		url.Values{"csrf": {form}, "email": {crashOwnerEmail}, "password": {crashOwnerPassword}})
	if err == nil && sc != http.StatusSeeOther {
		err = fmt.Errorf("console sign-in: HTTP %d: %s", sc, clipPage(page))
	}
	if err == nil {
		oc.csrf, err = token("/console/approvals")
	}
	if err != nil {
		oc.close()
		return nil, err
	}
	return oc, nil
}

func (oc *ownerConsole) close() { oc.tr.CloseIdleConnections() }

// do sends one request; a form goes as the console's own page sends it.
func (oc *ownerConsole) do(ctx context.Context, method, path string, form url.Values) (int, string, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, oc.origin+path, body)
	if err != nil {
		return 0, "", err
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", oc.origin)
	}
	resp, err := oc.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, string(b), nil
}

func clipPage(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// pickDecision approves three times in four.
func pickDecision(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return decisionReject
	}
	return decisionApprove
}

// decide takes one pending spend of the approvals agent, unless no more
// than keep are left, and sends the owner's decision on it. The console answers a decision it carried out
// with a redirect, by which time the spend has left pending_approval for
// good; the spend is then read back and checked. answered is false when no
// answer arrived (the server was killed) or there was nothing to decide.
func (g *guardProcess) decide(ctx context.Context, oc *ownerConsole, m *crashModel, agents []crashAgent,
	rng *rand.Rand, keep int) (decided, answered bool) {
	k, ok := m.takePending(approvalsAgent, rng, pickDecision(rng), keep)
	if !ok {
		return false, false
	}
	sc, page, err := oc.do(ctx, http.MethodPost, "/console/approvals/"+k.approval+"/decide",
		url.Values{"csrf": {oc.csrf}, "decision": {k.decision}, "items_hash": {k.itemsHash}})
	switch {
	case err != nil || sc >= 500:
		return true, false // killed under it: the decision may or may not have happened
	case sc != http.StatusSeeOther:
		m.problem("owner %ss %s (spend %s): HTTP %d: %s", k.decision, k.approval, k.id, sc, clipPage(page))
		return true, true
	}
	sc, b, err := g.call(ctx, http.MethodGet, "/v1/spends/"+k.id, agents[approvalsAgent].key, "", nil)
	if err != nil || sc >= 500 {
		return true, true
	}
	v, err := decodeSpend(b)
	if sc != http.StatusOK || err != nil {
		m.problem("spend %s after the owner's %s: HTTP %d %s (%v)", k.id, k.decision, sc, b, err)
		return true, true
	}
	if v.Status == "pending_approval" {
		m.problem("spend %s is still pending after the console answered the owner's %s", k.id, k.decision)
	}
	m.observe(nil, v, "after the owner's "+k.decision)
	m.noteDecision(k.decision, v.Status)
	return true, true
}

// ownerDecides signs in and decides pending spends until stop; the kill
// that comes with stop may cut any request short, sign-in included. It
// leaves a few for the owner to decide after the restart.
func (g *guardProcess) ownerDecides(ctx context.Context, m *crashModel, agents []crashAgent, rng *rand.Rand,
	stop <-chan struct{}, st *loadStats) {
	oc, err := g.signIn(ctx)
	if err != nil {
		return // the kill came first; the decisions after the restart cover the owner
	}
	defer oc.close()
	tick := time.NewTicker(15 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		if decided, answered := g.decide(ctx, oc, m, agents, rng, 3); decided {
			st.add(answered)
		}
	}
}

// decideAfterRestart decides up to n of the spends left pending, on the
// freshly restarted service: every one must be answered.
func (g *guardProcess) decideAfterRestart(ctx context.Context, t *testing.T, m *crashModel, agents []crashAgent, rng *rand.Rand, n int) int {
	oc, err := g.signIn(ctx)
	if err != nil {
		t.Fatalf("the owner cannot sign in to the restarted service: %v\n%s", err, g.logTail())
	}
	defer oc.close()
	done := 0
	for ; done < n; done++ {
		decided, answered := g.decide(ctx, oc, m, agents, rng, 0)
		if !decided {
			break
		}
		if !answered {
			m.problem("an owner's decision after the restart got no answer")
		}
	}
	return done
}

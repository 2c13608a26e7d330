package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
	"github.com/agentpay/guard/transport/receipt"
)

// receiptsPolicy lets an agent pay api.vendor.com at once.
const receiptsPolicy = `{"per_spend_limit":"100.00","approval_over":"100.00","trusted_destinations":["api.vendor.com"]}`

var spendKeys atomic.Uint64

// paid is a settled spend and its receipt.
type paid struct{ spend, receipt string }

// pay settles a spend of the agent and returns it with its receipt id.
func pay(t *testing.T, s *guardtest.Server, agentKey, amount, path string) paid {
	t.Helper()
	r := s.Do(t, http.MethodPost, "/v1/spends", agentKey, map[string]string{"Idempotency-Key": fmt.Sprintf("rc-%d", spendKeys.Add(1))},
		fmt.Sprintf(`{"amount":%q,"destination":"api.vendor.com","resource":{"url":"https://api.vendor.com%s"}}`, amount, path))
	st, _ := r.Body["settlement"].(map[string]any)
	rid, _ := st["receipt_id"].(string)
	if r.Status != http.StatusCreated || r.Body["status"] != "settled" || rid == "" {
		t.Fatalf("the spend did not settle with a receipt: %d %s", r.Status, r.Raw)
	}
	return paid{spend: r.Body["id"].(string), receipt: rid}
}

// payInTurn pays 1.00 with each agent key in turn, at path prefix and the
// payment's index, and returns the payments in that order.
func payInTurn(t *testing.T, s *guardtest.Server, prefix string, agentKeys ...string) []paid {
	t.Helper()
	out := make([]paid, 0, len(agentKeys))
	for i, k := range agentKeys {
		out = append(out, pay(t, s, k, "1.00", fmt.Sprintf("%s%d", prefix, i)))
	}
	return out
}

// receiptJWS reads a receipt's token from the server directly.
func receiptJWS(t *testing.T, s *guardtest.Server, key, id string) string {
	t.Helper()
	r := s.Do(t, http.MethodGet, "/v1/receipts/"+id, key, nil, nil)
	jws, _ := r.Body["jws"].(string)
	if r.Status != http.StatusOK || jws == "" {
		t.Fatalf("GET /v1/receipts/%s: %d %s", id, r.Status, r.Raw)
	}
	return jws
}

// cliAt runs a command against the server at base with the owner key.
func cliAt(t *testing.T, base, key string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return cliRun(t, nil, append(args, "-server", base, "-key", key)...)
}

// rewritingProxy forwards to target and lets edit change the body of every
// 200 answer, as a man in the middle or a corrupted store would; edit gets
// the request's path.
func rewritingProxy(t *testing.T, target string, edit func(path string, body []byte) []byte) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b = edit(resp.Request.URL.Path, b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// editObject decodes a JSON object, lets edit change it and encodes it.
func editObject(t *testing.T, body []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Errorf("not a JSON object: %v: %s", err, body)
		return body
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Error(err)
	}
	return b
}

// editEvents lets edit change the events of a GET /v1/events page.
func editEvents(t *testing.T, body []byte, edit func([]any) []any) []byte {
	return editObject(t, body, func(m map[string]any) { m["data"] = edit(m["data"].([]any)) })
}

// editReceipt lets edit change receipt rid wherever an answer carries it:
// GET /v1/receipts/{rid}, or an item of a GET /v1/receipts page.
func editReceipt(t *testing.T, path string, body []byte, rid string, edit func(map[string]any)) []byte {
	switch path {
	case "/v1/receipts/" + rid:
		return editObject(t, body, edit)
	case "/v1/receipts":
		return editObject(t, body, func(m map[string]any) {
			for _, it := range m["data"].([]any) {
				if item := it.(map[string]any); item["id"] == rid {
					edit(item)
				}
			}
		})
	}
	return body
}

// eventOf finds the event of a spend in a page's data; -1 when absent.
func eventOf(events []any, spendID string) int {
	for i, e := range events {
		if obj, _ := e.(map[string]any)["data"].(map[string]any)["object"].(map[string]any); obj["id"] == spendID {
			return i
		}
	}
	return -1
}

// alterPayload changes a signed claim of a token without signing again.
func alterPayload(t *testing.T, jws, claim string, value any) string {
	t.Helper()
	parts := strings.Split(jws, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	parts[1] = base64.RawURLEncoding.EncodeToString(editObject(t, raw, func(m map[string]any) { m[claim] = value }))
	return strings.Join(parts, ".")
}

func TestCLIReceiptsGet(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	agentID, agentKey := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	first := pay(t, s, agentKey, "2.50", "/r1")
	second := pay(t, s, agentKey, "1.25", "/r2?q=1")

	out := cliOK(t, s, owner.TestKey, "receipts", "get", first.receipt)
	for label, want := range map[string]string{
		"receipt ": first.receipt, "spend ": first.spend, "agent ": agentID, "owner ": owner.ID,
		"environment ": "practice", "amount ": "2.50 usdc", "amount settled ": "usdc", "destination ": "api.vendor.com",
		"resource ": "GET api.vendor.com/r1", "policy ": "version 1 (sha256:", "prev ": "(none: the first receipt",
		"kid ": "rk_", "issued ": "Z",
	} {
		if line := lineWith(out, label); !strings.HasPrefix(line, label) || !strings.Contains(line, want) {
			t.Errorf("receipts get: the %q line is %q, want it to hold %q\n%s", strings.TrimSpace(label), line, want, out)
		}
	}
	kid := strings.TrimSpace(strings.TrimPrefix(lineWith(out, "kid "), "kid"))
	if !strings.HasSuffix(out, "signature valid (kid "+kid+")\n") || !bytes.Contains(s.JWKS(), []byte(`"`+kid+`"`)) {
		t.Errorf("receipts get does not end with a valid signature by a key of the JWKS (%s):\n%s", s.JWKS(), out)
	}

	// The second receipt links to the first.
	out = cliOK(t, s, owner.TestKey, "receipts", "get", second.receipt)
	if want := receipt.ChainHash(receiptJWS(t, s, owner.TestKey, first.receipt)); !strings.Contains(lineWith(out, "prev "), want) {
		t.Errorf("the second receipt's prev line is %q, want %s", lineWith(out, "prev "), want)
	}
	if !strings.Contains(lineWith(out, "resource "), "GET api.vendor.com/r2?q=1") {
		t.Errorf("the second receipt's resource line is %q", lineWith(out, "resource "))
	}
	v := cliJSON(t, s, owner.TestKey, "receipts", "get", second.receipt)
	if v["id"] != second.receipt || v["spend_id"] != second.spend || v["object"] != "receipt" {
		t.Errorf("receipts get -json printed %v", v)
	}

	// An unknown receipt is the server's 404.
	_, errOut, err := cliAt(t, s.URL, owner.TestKey, "receipts", "get", "rcp_00000000000000000000000000000000")
	var se *serverError
	if !errors.As(err, &se) || se.Status != http.StatusNotFound || !strings.HasPrefix(errOut, "error: ") || exitCode(err) != 1 {
		t.Errorf("receipts get of an unknown receipt: %v, stderr %q", err, errOut)
	}

	// A token changed on the way does not verify, and nothing is printed
	// as if it did.
	tampered := rewritingProxy(t, s.URL, func(path string, body []byte) []byte {
		if path != "/v1/receipts/"+first.receipt {
			return body
		}
		return editObject(t, body, func(m map[string]any) { m["jws"] = alterPayload(t, m["jws"].(string), "amount_settled", "0.01") })
	})
	out, _, err = cliAt(t, tampered, owner.TestKey, "receipts", "get", first.receipt)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), first.receipt) || !strings.Contains(err.Error(), "signature does not verify") || out != "" {
		t.Errorf("receipts get of a tampered receipt: %v, stdout %q", err, out)
	}
	// So does a receipt object that says other than its signed claims.
	relabeled := rewritingProxy(t, s.URL, func(path string, body []byte) []byte {
		if !strings.HasPrefix(path, "/v1/receipts/") {
			return body
		}
		return editObject(t, body, func(m map[string]any) { m["spend_id"] = second.spend })
	})
	_, _, err = cliAt(t, relabeled, owner.TestKey, "receipts", "get", first.receipt)
	if err == nil || !strings.Contains(err.Error(), "disagrees with its signed claims") || !strings.Contains(err.Error(), "spend_id") {
		t.Errorf("receipts get of a relabeled receipt: %v", err)
	}
}

func TestCLIReceiptsVerify(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	agentA, keyA := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	agentB, keyB := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	// Interleaved: the chain runs through both agents' receipts.
	spends := payInTurn(t, s, "/v", keyA, keyB, keyA, keyA, keyB)
	first, last := spends[0].receipt, spends[len(spends)-1].receipt

	proxy, requests := recordingProxy(t, s.URL)
	out, errOut, err := cliAt(t, proxy, owner.TestKey, "receipts", "verify", "-limit", "2")
	if err != nil {
		t.Fatalf("receipts verify: %v\n%s%s", err, out, errOut)
	}
	if want := fmt.Sprintf("5 receipts, signatures valid, chain unbroken from %s to %s\n", first, last); !strings.HasSuffix(out, want) {
		t.Errorf("receipts verify printed:\n%s\nwant it to end with %q", out, want)
	}
	if line := lineWith(out, "anchor "); !strings.Contains(line, first) || !strings.Contains(line, "starts the chain") {
		t.Errorf("receipts verify's anchor line: %q", line)
	}
	if line := lineWith(out, "signed by "); !strings.Contains(line, "rk_") || !strings.Contains(line, "(5)") {
		t.Errorf("receipts verify's key line: %q", line)
	}
	// Five events two at a time: three pages, each of spend.settled only.
	var pages []string
	seen := requests()
	for _, r := range seen {
		if strings.HasPrefix(r, "GET /v1/events?") {
			pages = append(pages, r)
		}
	}
	if len(pages) != 3 {
		t.Errorf("receipts verify -limit 2 read %d pages of events for 5 receipts, want 3: %v", len(pages), pages)
	}
	for i, p := range pages {
		if !strings.Contains(p, "type=spend.settled") || !strings.Contains(p, "limit=2") || strings.Contains(p, "starting_after=evt_") != (i > 0) {
			t.Errorf("events request %d: %s", i, p)
		}
	}
	// The receipts come from their list, a page of them per request,
	// not one request each.
	var listPages, single []string
	for _, r := range seen {
		switch {
		case strings.HasPrefix(r, "GET /v1/receipts?"):
			listPages = append(listPages, r)
		case strings.HasPrefix(r, "GET /v1/receipts/"):
			single = append(single, r)
		}
	}
	if len(listPages) != 3 || len(single) != 0 {
		t.Errorf("receipts verify -limit 2 read the receipts in %d list pages and %d single reads, want 3 and none: %v %v",
			len(listPages), len(single), listPages, single)
	}

	// One agent: its signatures, and the output says the links were not
	// checked.
	out = cliOK(t, s, owner.TestKey, "receipts", "verify", "-agent", agentB)
	if !strings.Contains(out, "2 receipts of agent "+agentB+", signatures valid; chain links not checked") || strings.Contains(out, "chain unbroken") {
		t.Errorf("receipts verify -agent printed:\n%s", out)
	}
	rep := cliJSON(t, s, owner.TestKey, "receipts", "verify", "-agent", agentA)
	if rep["receipts"] != float64(3) || rep["valid"] != true || rep["chain_checked"] != false || rep["agent_id"] != agentA {
		t.Errorf("receipts verify -agent -json printed %v", rep)
	}
	rep = cliJSON(t, s, owner.TestKey, "receipts", "verify")
	if rep["receipts"] != float64(5) || rep["valid"] != true || rep["chain_checked"] != true ||
		rep["first_receipt"] != first || rep["last_receipt"] != last || rep["anchor_prev"] != "" || len(rep["problems"].([]any)) != 0 {
		t.Errorf("receipts verify -json printed %v", rep)
	}

	// The live environment has no receipts yet.
	out = cliOK(t, s, owner.LiveKey, "receipts", "verify")
	if !strings.Contains(out, "no receipts to check") || !strings.Contains(out, "(live)") {
		t.Errorf("receipts verify of an empty environment printed %q", out)
	}

	// 31 days on, the first spends' events are gone: the oldest receipt
	// listed is an anchor whose predecessor is not listed.
	if r := s.Do(t, http.MethodPost, "/v1/test/clock/advance", owner.TestKey, nil, `{"seconds":2678400}`); r.Status != http.StatusOK {
		t.Fatalf("advancing the practice clock: %d %s", r.Status, r.Raw)
	}
	later := []paid{pay(t, s, keyA, "1.00", "/later1"), pay(t, s, keyB, "1.00", "/later2")}
	out = cliOK(t, s, owner.TestKey, "receipts", "verify")
	anchor := lineWith(out, "anchor ")
	if !strings.Contains(anchor, later[0].receipt) || !strings.Contains(anchor, "prev "+receipt.ChainHash(receiptJWS(t, s, owner.TestKey, last))) ||
		!strings.Contains(anchor, "events are kept 30 days") {
		t.Errorf("the anchor line after 31 days: %q", anchor)
	}
	if !strings.HasSuffix(out, fmt.Sprintf("2 receipts, signatures valid, chain unbroken from %s to %s\n", later[0].receipt, later[1].receipt)) {
		t.Errorf("receipts verify after 31 days printed:\n%s", out)
	}
}

// Receipts signed before a rotation of the receipt key verify with the
// retired key, and the chain goes on across the change.
func TestCLIReceiptsVerifyAcrossKeyRotation(t *testing.T) {
	dir := t.TempDir()
	inDir := guardtest.WithConfig(func(c *wire.Config) { c.Data = dir })
	var owner guardtest.Owner
	var agentKey string
	var before []paid
	if !t.Run("before the rotation", func(t *testing.T) {
		s := guardtest.Start(t, inDir)
		owner = s.NewOwner(t)
		_, agentKey = s.NewAgent(t, owner.TestKey, receiptsPolicy)
		before = []paid{pay(t, s, agentKey, "1.00", "/a"), pay(t, s, agentKey, "2.00", "/b")}
	}) {
		t.FailNow()
	}
	if _, errOut, err := receiptKeys(t, "rotate", "-data", dir); err != nil {
		t.Fatalf("receipt-keys rotate: %v\n%s", err, errOut)
	}
	s := guardtest.Start(t, inDir)
	after := []paid{pay(t, s, agentKey, "3.00", "/c"), pay(t, s, agentKey, "4.00", "/d")}
	out := cliOK(t, s, owner.TestKey, "receipts", "verify")
	if !strings.HasSuffix(out, fmt.Sprintf("4 receipts, signatures valid, chain unbroken from %s to %s\n", before[0].receipt, after[1].receipt)) {
		t.Errorf("receipts verify across a key rotation printed:\n%s", out)
	}
	keys := lineWith(out, "signed by ")
	if strings.Count(keys, "rk_") != 2 || strings.Count(keys, "(2)") != 2 {
		t.Errorf("receipts verify's key line after a rotation: %q, want two keys with two receipts each", keys)
	}
	// Each receipt names the key that signed it.
	oldKid := strings.TrimSpace(strings.TrimPrefix(lineWith(cliOK(t, s, owner.TestKey, "receipts", "get", before[0].receipt), "kid "), "kid"))
	newKid := strings.TrimSpace(strings.TrimPrefix(lineWith(cliOK(t, s, owner.TestKey, "receipts", "get", after[0].receipt), "kid "), "kid"))
	if oldKid == newKid || !strings.HasPrefix(keys, "signed by "+oldKid+" (2), "+newKid+" (2)") {
		t.Errorf("old receipts signed by %q, new ones by %q; key line %q", oldKid, newKid, keys)
	}
}

// A receipt altered, left out or put out of order between the server and
// the command fails the check: the command names the receipt and why, and
// exits with status 1.
func TestCLIReceiptsVerifyFindsTampering(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	_, keyA := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	_, keyB := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	sp := payInTurn(t, s, "/t", keyA, keyB, keyA, keyB)
	for _, tc := range []struct {
		name string
		edit func(path string, body []byte) []byte
		// failing is the receipt the first FAIL line names, and why.
		failing, why string
	}{
		{"a claim altered", func(path string, body []byte) []byte {
			return editReceipt(t, path, body, sp[1].receipt, func(m map[string]any) {
				m["jws"] = alterPayload(t, m["jws"].(string), "amount_settled", "0.01")
			})
		}, sp[1].receipt, "the signature does not verify"},
		{"a settled spend left out (a gap)", func(path string, body []byte) []byte {
			if path != "/v1/events" {
				return body
			}
			return editEvents(t, body, func(evs []any) []any {
				i := eventOf(evs, sp[1].spend)
				return append(evs[:i:i], evs[i+1:]...)
			})
		}, sp[2].receipt, "chain broken: its prev is sha256:"},
		{"two receipts swapped in the order", func(path string, body []byte) []byte {
			if path != "/v1/events" {
				return body
			}
			return editEvents(t, body, func(evs []any) []any {
				a, b := evs[eventOf(evs, sp[1].spend)].(map[string]any), evs[eventOf(evs, sp[2].spend)].(map[string]any)
				a["data"], b["data"] = b["data"], a["data"]
				a["agent_id"], b["agent_id"] = b["agent_id"], a["agent_id"]
				return evs
			})
		}, sp[2].receipt, "chain broken"},
		{"another receipt served", func(path string, body []byte) []byte {
			// Listed and read on its own, receipt 2 is receipt 1.
			return editReceipt(t, path, body, sp[2].receipt, func(m map[string]any) {
				r := s.Do(t, http.MethodGet, "/v1/receipts/"+sp[1].receipt, owner.TestKey, nil, nil)
				for k, v := range r.Body {
					m[k] = v
				}
			})
		}, sp[2].receipt, "the server answered receipt \"" + sp[1].receipt + "\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := cliAt(t, rewritingProxy(t, s.URL, tc.edit), owner.TestKey, "receipts", "verify")
			if err == nil || exitCode(err) != 1 {
				t.Fatalf("receipts verify passed (%v):\n%s", err, out)
			}
			fail := lineWith(out, "FAIL ")
			if !strings.HasPrefix(fail, "FAIL "+tc.failing+" ") || !strings.Contains(fail, tc.why) {
				t.Errorf("the first FAIL line is %q, want one for %s holding %q\n%s", fail, tc.failing, tc.why, out)
			}
			if !strings.Contains(err.Error(), tc.failing) || strings.Contains(out, "chain unbroken") || !strings.Contains(out, "failed") {
				t.Errorf("receipts verify: %v\n%s", err, out)
			}
		})
	}
	// The gap names the receipts on either side of it.
	gap := rewritingProxy(t, s.URL, func(path string, body []byte) []byte {
		if path != "/v1/events" {
			return body
		}
		return editEvents(t, body, func(evs []any) []any {
			i := eventOf(evs, sp[1].spend)
			return append(evs[:i:i], evs[i+1:]...)
		})
	})
	out, _, _ := cliAt(t, gap, owner.TestKey, "receipts", "verify")
	if fail := lineWith(out, "FAIL "); !strings.Contains(fail, "the receipt before it, "+sp[0].receipt+",") ||
		!strings.Contains(fail, receipt.ChainHash(receiptJWS(t, s, owner.TestKey, sp[1].receipt))) {
		t.Errorf("the gap's FAIL line: %q", fail)
	}
	// And the real server, unaltered, passes.
	if out := cliOK(t, s, owner.TestKey, "receipts", "verify"); !strings.Contains(out, "4 receipts, signatures valid, chain unbroken") {
		t.Errorf("receipts verify without a proxy printed:\n%s", out)
	}
}

// A settled spend without a receipt is reported and fails nothing.
func TestCLIReceiptsVerifyReportsSpendWithoutReceipt(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	_, key := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	sp := []paid{pay(t, s, key, "1.00", "/n0"), pay(t, s, key, "1.00", "/n1"), pay(t, s, key, "1.00", "/n2")}
	// The event of a spend the service could not sign a receipt for
	// carries settlement.receipt_id null; the newest one reads so here.
	proxy := rewritingProxy(t, s.URL, func(path string, body []byte) []byte {
		if path != "/v1/events" {
			return body
		}
		return editEvents(t, body, func(evs []any) []any {
			obj := evs[eventOf(evs, sp[2].spend)].(map[string]any)["data"].(map[string]any)["object"].(map[string]any)
			obj["settlement"] = map[string]any{"receipt_id": nil}
			return evs
		})
	})
	out, errOut, err := cliAt(t, proxy, owner.TestKey, "receipts", "verify")
	if err != nil {
		t.Fatalf("receipts verify: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(lineWith(out, "spend "+sp[2].spend), "settled without a receipt") ||
		!strings.HasSuffix(out, fmt.Sprintf("2 receipts, signatures valid, chain unbroken from %s to %s\n", sp[0].receipt, sp[1].receipt)) {
		t.Errorf("receipts verify printed:\n%s", out)
	}
}

// -jwks pins the keys: signatures are checked with the file's keys, never
// with what the server serves, so a JWKS swapped on the way fools nothing
// and a file without the signing key fails every receipt.
func TestCLIReceiptsVerifyWithPinnedKeys(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	_, key := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	for i := range 3 {
		pay(t, s, key, "1.00", fmt.Sprintf("/p%d", i))
	}
	dir := t.TempDir()
	trusted := filepath.Join(dir, "trusted.json")
	r := s.Do(t, http.MethodGet, "/.well-known/jwks.json", "", nil, nil)
	if err := os.WriteFile(trusted, []byte(r.Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := receipt.GenerateKey(rand.Reader, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	kr, err := receipt.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.json")
	if err := os.WriteFile(foreign, kr.JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	// A proxy that serves the foreign keys as the server's.
	swapped := rewritingProxy(t, s.URL, func(path string, body []byte) []byte {
		if path == "/.well-known/jwks.json" {
			return kr.JWKS()
		}
		return body
	})

	out, _, err := cliAt(t, swapped, owner.TestKey, "receipts", "verify")
	if exitCode(err) != 1 || !strings.Contains(out, "which the server's JWKS does not list") {
		t.Errorf("with the server's (swapped) keys: %v\n%s", err, out)
	}
	out, errOut, err := cliAt(t, swapped, owner.TestKey, "receipts", "verify", "-jwks", trusted)
	if err != nil || !strings.Contains(out, "3 receipts, signatures valid, chain unbroken") {
		t.Errorf("with the pinned keys: %v\n%s%s", err, out, errOut)
	}
	out, _, err = cliAt(t, s.URL, owner.TestKey, "receipts", "verify", "-jwks", foreign)
	if exitCode(err) != 1 || !strings.Contains(out, "which the JWKS in "+foreign+" does not list") {
		t.Errorf("with keys that did not sign them: %v\n%s", err, out)
	}
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{empty, filepath.Join(dir, "missing.json")} {
		if _, errOut, err := cliAt(t, s.URL, owner.TestKey, "receipts", "get", "rcp_00000000000000000000000000000000", "-jwks", bad); err == nil ||
			!strings.Contains(errOut+err.Error(), "-jwks") {
			t.Errorf("-jwks %s: %v %s", bad, err, errOut)
		}
	}
}

// A read refused by the rate limit waits as Retry-After asks, then goes on.
func TestCLIReceiptsWaitOnRateLimit(t *testing.T) {
	s := guardtest.Start(t)
	owner := s.NewOwner(t)
	_, key := s.NewAgent(t, owner.TestKey, receiptsPolicy)
	p := pay(t, s, key, "1.00", "/limited")
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var refused atomic.Int32
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/receipts") && refused.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":{"type":"rate_limit_error","code":"rate_limited","message":"Rate limit reached.","param":null},"request_id":"req_1"}`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	defer limited.Close()
	out, errOut, err := cliAt(t, limited.URL, owner.TestKey, "receipts", "verify")
	if err != nil || !strings.Contains(out, "1 receipt, signatures valid, chain unbroken from "+p.receipt) {
		t.Fatalf("receipts verify through a rate limit: %v\n%s%s", err, out, errOut)
	}
	if refused.Load() != 2 || !strings.Contains(errOut, "rate limit") || strings.Contains(errOut, "error:") {
		t.Errorf("%d receipt requests, stderr %q; want one refused, one waited for, and no error", refused.Load(), errOut)
	}
}

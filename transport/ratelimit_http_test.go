package transport_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/guardtest"
)

// The rate limits of spec 8.1 through the real listener, with the fake
// clock driving the limiter: nothing refills until a test advances it.
// Every test here runs with the limits of the spec (scale 1), not the
// raised ones guardtest gives other tests.

// startLimited is start with the limits of spec 8.1.
func startLimited(t *testing.T, opts ...guardtest.Option) *env {
	t.Helper()
	return start(t, append([]guardtest.Option{guardtest.WithConfig(func(c *wire.Config) { c.RateLimitScale = 1 })}, opts...)...)
}

// rate is the RateLimit-* and Retry-After headers of one answer.
type rate struct {
	limit, remaining, reset int
	retryAfter              int // 0: the header is absent
}

// rateOf reads the RateLimit headers, failing the test when one is
// missing or not a whole number.
func rateOf(t *testing.T, r guardtest.Response) rate {
	t.Helper()
	num := func(name string) int {
		v := r.Header.Get(name)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("answer %d: header %s = %q, want a whole number: %s", r.Status, name, v, r.Raw)
		}
		return n
	}
	rt := rate{limit: num("RateLimit-Limit"), remaining: num("RateLimit-Remaining"), reset: num("RateLimit-Reset")}
	if r.Header.Get("Retry-After") != "" {
		rt.retryAfter = num("Retry-After")
	}
	return rt
}

// noRateHeaders fails when r carries any rate limit header.
func noRateHeaders(t *testing.T, what string, r guardtest.Response) {
	t.Helper()
	for _, h := range []string{"RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		if v := r.Header.Get(h); v != "" {
			t.Errorf("%s: %s = %q, want no rate limit headers", what, h, v)
		}
	}
}

// wantAllowed checks an answer that passed its limits: the reported limit
// and requests left, and no Retry-After.
func wantAllowed(t *testing.T, what string, r guardtest.Response, limit, remaining int) {
	t.Helper()
	rt := rateOf(t, r)
	if rt.limit != limit || rt.remaining != remaining {
		t.Fatalf("%s: RateLimit-Limit %d, RateLimit-Remaining %d; want %d and %d", what, rt.limit, rt.remaining, limit, remaining)
	}
	if rt.retryAfter != 0 {
		t.Errorf("%s: Retry-After %d on an allowed request", what, rt.retryAfter)
	}
}

// want429 checks a refusal: the error body of api-decisions.md, the
// headers of the limit that refused (nothing left), a Retry-After of
// retryAfter seconds, and a message that names the limit (mention) and
// the wait.
func want429(t *testing.T, r guardtest.Response, limit, retryAfter int, mention string) {
	t.Helper()
	e := wantError(t, r, http.StatusTooManyRequests, "rate_limit_error", "rate_limited", "")
	rt := rateOf(t, r)
	if rt.limit != limit || rt.remaining != 0 || rt.retryAfter != retryAfter {
		t.Errorf("429 headers: limit %d, remaining %d, Retry-After %d; want %d, 0, %d", rt.limit, rt.remaining, rt.retryAfter, limit, retryAfter)
	}
	if rt.reset < rt.retryAfter {
		t.Errorf("429: RateLimit-Reset %d is before Retry-After %d", rt.reset, rt.retryAfter)
	}
	msg, _ := e["message"].(string)
	if !strings.Contains(msg, mention) || !strings.Contains(msg, fmt.Sprintf("Retry after %d second", retryAfter)) {
		t.Errorf("429 message %q should name %q and the wait of %d s", msg, mention, retryAfter)
	}
}

// advance moves the fake clock by whole seconds.
func advance(s *guardtest.Server, seconds int) { s.Clock.Advance(time.Duration(seconds) * time.Second) }

// TestRateLimitSpendsPerAgent: 20 payments a minute plus a burst of 5 in
// practice. The refused one does nothing: no spend, no change of the
// balance or the list, and its Idempotency-Key stays free for the retry.
func TestRateLimitSpendsPerAgent(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	body := spendBody("0.10", "api.vendor.com", "/report")
	for i := range 25 {
		r := spend(t, s, e.agentKey, newKey(), body)
		mustStatus(t, r, http.StatusCreated)
		// Of the key's 150, the agent's 25 a minute and 1000 a day, the
		// per-minute allowance of the agent is the tightest.
		wantAllowed(t, fmt.Sprintf("spend %d", i+1), r, 25, 24-i)
	}
	before := balance(t, s, e.agentKey)
	count := spendCount(t, s, e.agentID)
	last := newest(t, s, e.agentKey, "/v1/spends")

	key := newKey()
	r := spend(t, s, e.agentKey, key, body)
	// One token every 60 s / 20 = 3 s.
	want429(t, r, 25, 3, "POST /v1/spends) of this agent, 20 per minute with a burst of 5 (25 at once) (practice)")
	if rt := rateOf(t, r); rt.reset != 75 {
		t.Errorf("RateLimit-Reset %d, want 75 (25 tokens, one every 3 s)", rt.reset)
	}

	if after := balance(t, s, e.agentKey); !reflect.DeepEqual(after, before) {
		t.Errorf("a refused spend changed the balance:\n before %v\n after  %v", before, after)
	}
	if n := spendCount(t, s, e.agentID); n != count {
		t.Errorf("a refused spend was stored: %d spends, were %d", n, count)
	}
	if got := newest(t, s, e.agentKey, "/v1/spends"); got != last {
		t.Errorf("the newest spend is %s after a refused spend, was %s", got, last)
	}

	// Retry-After later the same key and body create the spend: the
	// refused request never used the key.
	advance(s, 3)
	r = spend(t, s, e.agentKey, key, body)
	mustStatus(t, r, http.StatusCreated)
	if r.Body["idempotent_replay"] != false || r.Body["status"] != "settled" {
		t.Errorf("retry after the refusal: replay %v, status %v; want a new settled spend", r.Body["idempotent_replay"], r.Body["status"])
	}
	wantAllowed(t, "spend after Retry-After", r, 25, 0)
	if n := spendCount(t, s, e.agentID); n != count+1 {
		t.Errorf("%d spends after the retry, want %d", n, count+1)
	}
	// The same key again is now a replay of that spend.
	mustStatus(t, spend(t, s, e.agentKey, key, body), http.StatusTooManyRequests)
	advance(s, 3)
	replay := spend(t, s, e.agentKey, key, body)
	mustStatus(t, replay, http.StatusOK)
	if replay.Body["id"] != r.Body["id"] {
		t.Errorf("replay answered %v, want the spend %v", replay.Body["id"], r.Body["id"])
	}
}

// TestRateLimitSpendsPerDayLive: live allows 200 payments a day per
// agent (burst 0) and 10 a minute plus 5. A request the per-minute limit
// refuses takes nothing from the daily one, so the day is spent only on
// payments that went through.
func TestRateLimitSpendsPerDayLive(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	_, key := s.NewAgent(t, e.owner.LiveKey, testPolicy)
	// The live pool is empty: every payment is declined at once (201).
	body := spendBody("1.00", "api.vendor.com", "/report")

	firstKey := newKey()
	first := spend(t, s, key, firstKey, body)
	mustStatus(t, first, http.StatusCreated)
	wantAllowed(t, "first live spend", first, 15, 14)

	// sendAll pays until the daily limit refuses, waiting out the
	// per-minute limit (6 s a payment), and returns how many went
	// through, the daily refusal and how many of the per-minute limit
	// came before it.
	elapsed := 0
	sendAll := func() (sent int, daily guardtest.Response, lastOK guardtest.Response, perMinute int) {
		for {
			r := spend(t, s, key, newKey(), body)
			if r.Status == http.StatusCreated {
				sent++
				lastOK = r
				if sent > 260 {
					t.Fatalf("%d live spends in %d s of fake time: the daily limit does not hold", sent, elapsed)
				}
				continue
			}
			e := wantError(t, r, http.StatusTooManyRequests, "rate_limit_error", "rate_limited", "")
			if msg, _ := e["message"].(string); strings.Contains(msg, "in a day") {
				return sent, r, lastOK, perMinute
			}
			want429(t, r, 15, 6, "POST /v1/spends")
			perMinute++
			advance(s, 6)
			elapsed += 6
		}
	}
	sent, refusal, lastOK, refusedPerMinute := sendAll()
	sent++ // the first
	// 200 in the day, not one more, however the minutes pass.
	if sent != 200 {
		t.Errorf("%d live spends before the daily limit refused (after %d s), want 200", sent, elapsed)
	}
	if refusedPerMinute == 0 {
		t.Error("the per-minute limit never refused")
	}
	// Nothing comes back until the first quarter hour's payments leave
	// the window: a day after that quarter hour ended (86400 + 900 s
	// from the limiter's start).
	if rt := rateOf(t, refusal); rt.limit != 200 || rt.remaining != 0 || rt.retryAfter != 87300-elapsed {
		t.Fatalf("daily 429 headers %+v after %d s, want limit 200, remaining 0, Retry-After %d", rt, elapsed, 87300-elapsed)
	}
	// The last payment before the refusal was reported by the daily limit,
	// then the tightest.
	if rt := rateOf(t, lastOK); rt.limit != 200 || rt.remaining != 0 {
		t.Errorf("last allowed spend: headers %+v, want the daily limit with nothing left", rt)
	}

	// A refusal by the daily limit gives the minute's token back: however
	// often the agent retries, it is told to wait for the day, never for
	// the minute.
	for i := range 20 {
		r := spend(t, s, key, newKey(), body)
		e := wantError(t, r, http.StatusTooManyRequests, "rate_limit_error", "rate_limited", "")
		if msg, _ := e["message"].(string); !strings.Contains(msg, "in a day") {
			t.Fatalf("retry %d after the daily refusal was refused by another limit: %q", i, msg)
		}
	}
	// Only payments requested count against the day: once every payment
	// has left the window (those of the second quarter hour, a day after
	// it ended), a replay and a request refused with 400 leave the whole
	// day's 200.
	advance(s, 88200-elapsed)
	replay := spend(t, s, key, firstKey, body)
	mustStatus(t, replay, http.StatusOK)
	wantError(t, spend(t, s, key, newKey(), `{"amount":"1.00"}`), http.StatusBadRequest, "invalid_request_error", "parameter_missing", "destination")
	if again, _, _, _ := sendAll(); again != 200 {
		t.Errorf("%d live spends in the next day, want 200: a replay or a 400 was counted", again)
	}
}

// TestDailyLimitSurvivesRestart: the day's payments are remembered across
// a restart (the buckets live in memory; the spends are in the journal),
// so a restart does not hand back the live daily allowance of 200.
func TestDailyLimitSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	clock := guardtest.NewFakeClock(epoch)
	opts := func(c *guardtest.FakeClock) []guardtest.Option {
		return []guardtest.Option{guardtest.WithClock(c), guardtest.WithConfig(func(cfg *wire.Config) {
			cfg.Data = dir
			cfg.RateLimitScale = 1
		})}
	}
	first := guardtest.Start(t, opts(clock)...)
	owner := first.NewOwner(t)
	_, key := first.NewAgent(t, owner.LiveKey, testPolicy)
	// The live pool is empty: every payment is declined at once (201),
	// and each counts against the daily limit.
	body := spendBody("1.00", "api.vendor.com", "/report")
	sent := 0
	for sent < 150 {
		r := spend(t, first, key, newKey(), body)
		if r.Status == http.StatusTooManyRequests {
			advance(first, 6) // the per-minute limit
			continue
		}
		mustStatus(t, r, http.StatusCreated)
		sent++
	}
	// Six live keys made today (10 a day): NewAgent's, and five more.
	if n := makeKeys(t, first, owner.LiveKey, 5); n != 5 {
		t.Fatalf("made %d keys before the restart, want 5", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := first.Service().Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	clock2 := guardtest.NewFakeClock(clock.Now())
	second := guardtest.Start(t, opts(clock2)...)
	// 200 a day, one back every 432 s: what is left is 200 - 150, plus
	// what the minutes spent sending earn back.
	after := 0
	for {
		r := spend(t, second, key, newKey(), body)
		if r.Status == http.StatusCreated {
			after++
			if after > 100 {
				t.Fatalf("%d spends after the restart and no daily refusal: the restart handed back the day", after)
			}
			continue
		}
		e := wantError(t, r, http.StatusTooManyRequests, "rate_limit_error", "rate_limited", "")
		if msg, _ := e["message"].(string); strings.Contains(msg, "in a day") {
			break
		}
		advance(second, 6)
	}
	elapsed := clock2.Now().Sub(epoch)
	if wantMax := 50 + int(elapsed/(432*time.Second)) + 1; after < 50 || after > wantMax {
		t.Errorf("%d spends after the restart before the daily limit refused (%v after the first), want 50 to %d", after, elapsed, wantMax)
	}
	// The keys made before the restart count too: 4 more, not 10. The
	// keys the owner was created with are not counted.
	if n := makeKeys(t, second, owner.LiveKey, 20); n != 4 {
		t.Errorf("%d keys made after the restart before the daily limit refused, want 4", n)
	}
}

// makeKeys makes up to n keys on new agents of the owner, three per agent,
// and returns how many it made before a 429 of the daily key limit.
func makeKeys(t *testing.T, s *guardtest.Server, ownerKey string, n int) int {
	t.Helper()
	made := 0
	for made < n {
		r := call(t, s, http.MethodPost, "/v1/agents", ownerKey, nil, `{"name":"keys"}`)
		mustStatus(t, r, http.StatusCreated)
		agent := r.Body["id"].(string)
		for range 3 {
			if made == n {
				break
			}
			r = call(t, s, http.MethodPost, "/v1/agents/"+agent+"/keys", ownerKey, nil, nil)
			if r.Status == http.StatusTooManyRequests {
				if msg, _ := errorOf(t, r)["message"].(string); !strings.Contains(msg, "keys created or rotated") {
					t.Fatalf("429 of another limit: %s", msg)
				}
				return made
			}
			mustStatus(t, r, http.StatusCreated)
			made++
		}
	}
	return made
}

// TestRateLimitCheckPracticeAndLive: the simulation endpoint allows 60 a
// minute plus 10 in practice and 30 plus 10 in live, per agent.
func TestRateLimitCheckPracticeAndLive(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	_, liveKey := s.NewAgent(t, e.owner.LiveKey, testPolicy)
	for _, tc := range []struct {
		env        string
		key        string
		rate, more int
		retryAfter int
	}{
		{"practice", e.agentKey, 60, 10, 1},
		{"live", liveKey, 30, 10, 2},
	} {
		t.Run(tc.env, func(t *testing.T) {
			check := func() guardtest.Response {
				return call(t, s, http.MethodPost, "/v1/spends/check", tc.key, nil, `{"destination":"api.vendor.com","amount":"1.00"}`)
			}
			for i := range tc.rate + tc.more {
				r := check()
				mustStatus(t, r, http.StatusOK)
				wantAllowed(t, fmt.Sprintf("check %d", i+1), r, tc.rate+tc.more, tc.rate+tc.more-1-i)
			}
			want429(t, check(), tc.rate+tc.more, tc.retryAfter, "POST /v1/spends/check")
			advance(s, tc.retryAfter)
			r := check()
			mustStatus(t, r, http.StatusOK)
			wantAllowed(t, "check after Retry-After", r, tc.rate+tc.more, 0)
		})
	}
}

// TestRateLimitAdminWritesPerKey: 30 administration writes a minute plus
// 10, per owner key. Reads with the same key and writes with another key
// go on.
func TestRateLimitAdminWritesPerKey(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	path := "/v1/agents/" + e.agentID + "/policy"
	publish := func() guardtest.Response {
		return call(t, s, http.MethodPost, path, e.owner.TestKey, nil, testPolicy)
	}
	// start created the agent and its key: 2 of the 40 are gone.
	for i := range 38 {
		r := publish()
		mustStatus(t, r, http.StatusOK)
		wantAllowed(t, fmt.Sprintf("write %d", i+3), r, 40, 37-i)
	}
	// One token every 60 s / 30 = 2 s.
	want429(t, publish(), 40, 2, "administration writes")
	dest := "/v1/agents/" + e.agentID + "/destinations"
	want429(t, call(t, s, http.MethodPost, dest, e.owner.TestKey, nil, `{"pattern":"x.example.org","list":"blocked"}`), 40, 2, "administration writes")
	want429(t, call(t, s, http.MethodDelete, dest+"/blocked/x.example.org", e.owner.TestKey, nil, nil), 40, 2, "administration writes")
	want429(t, call(t, s, http.MethodPost, "/v1/agents", e.owner.TestKey, nil, `{"name":"one more"}`), 40, 2, "administration writes")

	// A read is limited per key only: 150 at once, 44 used before it.
	r := call(t, s, http.MethodGet, "/v1/agents/"+e.agentID, e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	wantAllowed(t, "read with the throttled key", r, 150, 150-45)
	// Another key of the same owner has its own allowance (live: 15 + 10).
	r = call(t, s, http.MethodPost, "/v1/agents", e.owner.LiveKey, nil, `{"name":"live one"}`)
	mustStatus(t, r, http.StatusCreated)
	wantAllowed(t, "write with another key", r, 25, 24)

	advance(s, 2)
	r = publish()
	mustStatus(t, r, http.StatusOK)
	wantAllowed(t, "write after Retry-After", r, 40, 0)
}

// TestRateLimitKeyCreationsPerOwner: live owners may create 10 keys a day
// (burst 0). A refused creation creates no key.
func TestRateLimitKeyCreationsPerOwner(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	live := e.owner.LiveKey
	var agents []string
	for i := range 4 {
		r := call(t, s, http.MethodPost, "/v1/agents", live, nil, fmt.Sprintf(`{"name":"keyed %d"}`, i))
		mustStatus(t, r, http.StatusCreated)
		agents = append(agents, r.Body["id"].(string))
	}
	newKeyFor := func(i int) guardtest.Response {
		return call(t, s, http.MethodPost, "/v1/agents/"+agents[i/3]+"/keys", live, nil, nil)
	}
	for i := range 10 {
		r := newKeyFor(i)
		mustStatus(t, r, http.StatusCreated)
		// Key creations (10 a day) are tighter than the key's writes (25).
		wantAllowed(t, fmt.Sprintf("key %d", i+1), r, 10, 9-i)
	}
	// Ten in a day, burst 0, counted in quarter hours: nothing until
	// the ten leave the window, a day after the quarter hour they were
	// made in (the limiter's first): 86400 + 900 s.
	r := newKeyFor(10)
	want429(t, r, 10, 87300, "keys created or rotated by this owner, 10 per day (live)")
	if rt := rateOf(t, r); rt.reset != 87300 {
		t.Errorf("RateLimit-Reset %d, want 87300", rt.reset)
	}
	advance(s, 87300-1)
	want429(t, newKeyFor(10), 10, 1, "keys created or rotated by this owner, 10 per day (live)")
	advance(s, 1)
	// The refused creations left the agent's third key slot free.
	r = newKeyFor(10)
	mustStatus(t, r, http.StatusCreated)
	wantAllowed(t, "key after Retry-After", r, 10, 9)
	// The practice environment of the same owner counts on its own (50).
	r = call(t, s, http.MethodPost, "/v1/agents/"+e.agentID+"/keys", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusCreated)
	if rt := rateOf(t, r); rt.limit == 10 {
		t.Errorf("a practice key creation was counted against the live limit: %+v", rt)
	}
}

// TestKeyCreationsCountOnlyKeysMade: a key request refused with 4xx gives
// its daily token back, and revoking never takes one, so that an owner
// whose key leaked can revoke it after a day of mistakes.
func TestKeyCreationsCountOnlyKeysMade(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	live := e.owner.LiveKey
	r := call(t, s, http.MethodPost, "/v1/agents", live, nil, `{"name":"keyed"}`)
	mustStatus(t, r, http.StatusCreated)
	agent := r.Body["id"].(string)
	path := "/v1/agents/" + agent + "/keys"
	// Refusals of every kind: bad body, unknown query parameter, unknown
	// agent, the quota of 3 active keys. None of them counts.
	for i := range 12 {
		r = call(t, s, http.MethodPost, path, live, nil, `{"bogus":1}`)
		mustStatus(t, r, http.StatusBadRequest)
		if i == 0 {
			wantAllowed(t, "refused creation", r, 10, 10)
		}
	}
	mustStatus(t, call(t, s, http.MethodPost, path+"?x=1", live, nil, nil), http.StatusBadRequest)
	mustStatus(t, call(t, s, http.MethodPost, "/v1/agents/agt_00000000000000000000000000000000/keys", live, nil, nil), http.StatusNotFound)
	var keys []string
	for i := range 3 {
		r = call(t, s, http.MethodPost, path, live, nil, nil)
		mustStatus(t, r, http.StatusCreated)
		wantAllowed(t, fmt.Sprintf("key %d", i+1), r, 10, 9-i)
		keys = append(keys, r.Body["id"].(string))
	}
	r = call(t, s, http.MethodPost, path, live, nil, nil)
	mustStatus(t, r, http.StatusConflict)
	wantAllowed(t, "key over the quota", r, 10, 7)
	// Revoking (again and again) takes nothing from the day's allowance.
	// The clock moves a minute at a time, for the per-key limit of
	// administration writes; nothing of the day's allowance comes back
	// within the day.
	advance(s, 60)
	for range 15 {
		r = call(t, s, http.MethodPost, "/v1/keys/"+keys[0]+"/revoke", live, nil, nil)
		mustStatus(t, r, http.StatusOK)
	}
	advance(s, 60)
	for i := range 7 {
		r = call(t, s, http.MethodPost, path, live, nil, nil)
		mustStatus(t, r, http.StatusCreated)
		wantAllowed(t, fmt.Sprintf("key after revocations %d", i+1), r, 10, 6-i)
		r = call(t, s, http.MethodPost, "/v1/keys/"+r.Body["id"].(string)+"/revoke", live, nil, nil)
		mustStatus(t, r, http.StatusOK)
	}
	// Ten keys made: the eleventh is refused, and a revocation still passes.
	advance(s, 60)
	want429(t, call(t, s, http.MethodPost, path, live, nil, nil), 10, 87300-180, "keys created or rotated")
	mustStatus(t, call(t, s, http.MethodPost, "/v1/keys/"+keys[1]+"/revoke", live, nil, nil), http.StatusOK)
}

// TestRateLimitPerKey: every request with a key counts against it, 120 a
// minute plus 30 in practice. A request the key's limit refuses takes
// nothing from the route's own limits.
func TestRateLimitPerKey(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	for i := range 150 {
		r := call(t, s, http.MethodGet, "/v1/me", e.agentKey, nil, nil)
		mustStatus(t, r, http.StatusOK)
		wantAllowed(t, fmt.Sprintf("request %d", i+1), r, 150, 149-i)
	}
	// One token every 60 s / 120 = 0.5 s: Retry-After rounds up to 1.
	want429(t, call(t, s, http.MethodGet, "/v1/balance", e.agentKey, nil, nil), 150, 1, "requests with this key")
	want429(t, spend(t, s, e.agentKey, newKey(), spendBody("0.10", "api.vendor.com", "/r")), 150, 1, "requests with this key")
	// Public routes ignore the key: they count against the client's IP,
	// 600 a minute plus 100, which the key's refusals took nothing from.
	r := call(t, s, http.MethodGet, "/healthz", e.agentKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	if rt := rateOf(t, r); rt.limit != 700 || rt.remaining < 690 || rt.retryAfter != 0 {
		t.Errorf("GET /healthz with a used-up key: rate headers %+v, want the public allowance of 700", rt)
	}

	// Another key of the same agent has its own allowance.
	r = call(t, s, http.MethodPost, "/v1/agents/"+e.agentID+"/keys", e.owner.TestKey, nil, nil)
	mustStatus(t, r, http.StatusCreated)
	second, _ := r.Body["secret"].(string)
	r = call(t, s, http.MethodGet, "/v1/me", second, nil, nil)
	mustStatus(t, r, http.StatusOK)
	wantAllowed(t, "the agent's second key", r, 150, 149)

	// A second earns two tokens; the spend is the tightest on the key.
	advance(s, 1)
	r = spend(t, s, e.agentKey, newKey(), spendBody("0.10", "api.vendor.com", "/r"))
	mustStatus(t, r, http.StatusCreated)
	wantAllowed(t, "spend after Retry-After", r, 150, 1)
}

// TestRateLimitInvalidKeysPerIP: every 401 counts against the client's
// IP, 30 per 10 minutes whatever the route or the key; the 31st bad
// attempt is 429. Valid keys from the same IP are not affected.
func TestRateLimitInvalidKeysPerIP(t *testing.T) {
	e := startLimited(t)
	s := e.srv
	bad := []struct {
		method, path, key string
		headers           map[string]string
	}{
		{http.MethodGet, "/v1/me", "", nil},
		{http.MethodGet, "/v1/balance", "svc_test_agent_nope", nil},
		{http.MethodPost, "/v1/spends", "svc_live_agent_0000000000000000000000000000000000000000000", map[string]string{"Idempotency-Key": "k1"}},
		{http.MethodGet, "/v1/spends", "", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}},
		{http.MethodPost, "/v1/agents", "svc_test_owner_made_up", nil},
	}
	for i := range 30 {
		b := bad[i%len(bad)]
		r := call(t, s, b.method, b.path, b.key, b.headers, nil)
		wantError(t, r, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
		wantAllowed(t, fmt.Sprintf("bad key %d", i+1), r, 30, 29-i)
	}
	// 30 in any 10 minutes, counted in minutes: nothing until the 30
	// leave the window, 10 minutes after the minute they were made in.
	for _, b := range bad {
		want429(t, call(t, s, b.method, b.path, b.key, b.headers, nil), 30, 660, "missing or invalid key")
	}
	// A valid key from the same IP goes on.
	r := call(t, s, http.MethodGet, "/v1/me", e.agentKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	wantAllowed(t, "a valid key from the same IP", r, 150, 149)

	advance(s, 659)
	want429(t, call(t, s, http.MethodGet, "/v1/me", "", nil, nil), 30, 1, "missing or invalid key")
	advance(s, 1)
	r = call(t, s, http.MethodGet, "/v1/me", "svc_test_agent_nope", nil, nil)
	wantError(t, r, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
	wantAllowed(t, "bad key after Retry-After", r, 30, 29)
}

// publicPaths are the routes that need no key.
var publicPaths = []string{"/healthz", "/.well-known/jwks.json", "/v1/openapi.json"}

// TestRateLimitPublicRoutesPerIP: the routes that need no key share one
// allowance per client IP, whatever key or version pin a request carries.
// Every answer reports it in the RateLimit headers, and once it is used up
// the answer is 429 with Retry-After. The service runs at a hundredth of
// the limits, where that allowance is 6 a minute plus 1: the test uses it
// up in 7 requests instead of 700, and sees rate_limit_scale apply to it.
func TestRateLimitPublicRoutesPerIP(t *testing.T) {
	s := guardtest.Start(t, guardtest.WithClock(guardtest.NewFakeClock(epoch)),
		guardtest.WithConfig(func(c *wire.Config) { c.RateLimitScale = 0.01 }))
	const (
		limit = 7  // 6 a minute plus a burst of 1
		every = 10 // seconds to earn one back: 60 / 6
	)
	// Clients of their own: the start polled /healthz from 127.0.0.1.
	a, b := s.From(t, "127.0.0.2"), s.From(t, "127.0.0.3")
	for i := range limit {
		path := publicPaths[i%len(publicPaths)]
		r := call(t, a, http.MethodGet, path, "", nil, nil)
		mustStatus(t, r, http.StatusOK)
		wantAllowed(t, fmt.Sprintf("GET %s, request %d", path, i+1), r, limit, limit-1-i)
		if rt := rateOf(t, r); rt.reset != (i+1)*every {
			t.Errorf("request %d: RateLimit-Reset %d, want %d", i+1, rt.reset, (i+1)*every)
		}
	}
	const mention = "requests to the routes that need no key (GET /healthz, /.well-known/jwks.json, /v1/openapi.json) from this IP address, 6 per minute with a burst of 1 (7 at once). Retry"
	for _, path := range publicPaths {
		want429(t, call(t, a, http.MethodGet, path, "", nil, nil), limit, every, mention)
	}
	// The key of a request is not read: a bad one is refused for the IP,
	// not answered 401.
	want429(t, call(t, a, http.MethodGet, "/healthz", "svc_test_agent_nope", nil, nil), limit, every, mention)

	// Another address has an allowance of its own. The limit comes before
	// the version pin, so a refused pin is counted and reports it too.
	wantAllowed(t, "another IP", call(t, b, http.MethodGet, "/healthz", "", nil, nil), limit, limit-1)
	r := call(t, b, http.MethodGet, "/v1/openapi.json", "", map[string]string{"Service-Version": "2020-01-01"}, nil)
	wantError(t, r, http.StatusBadRequest, "invalid_request_error", "unknown_version", "Service-Version")
	wantAllowed(t, "a refused version pin", r, limit, limit-2)

	// Retry-After later the first address has one request again.
	advance(s, every)
	r = call(t, a, http.MethodGet, "/.well-known/jwks.json", "", nil, nil)
	mustStatus(t, r, http.StatusOK)
	wantAllowed(t, "after Retry-After", r, limit, 0)
	want429(t, call(t, a, http.MethodGet, "/healthz", "", nil, nil), limit, every, mention)
}

// TestRateLimitHeaders: every answer of a route carries the RateLimit
// headers, successes and errors alike, keyed routes and those without a
// key; a path that is no route does not, and neither does anything when
// the limits are switched off.
func TestRateLimitHeaders(t *testing.T) {
	e := start(t) // the raised limits guardtest gives every test
	s := e.srv
	sp := created(t, s, e.agentKey, spendBody("0.10", "api.vendor.com", "/r"))
	id, _ := sp["id"].(string)
	for _, c := range []struct {
		method, path, key string
		headers           map[string]string
		body              any
		status            int
	}{
		{http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": newKey()}, spendBody("0.10", "api.vendor.com", "/r"), 201},
		{http.MethodPost, "/v1/spends/check", e.agentKey, nil, `{"destination":"api.vendor.com"}`, 200},
		{http.MethodGet, "/v1/spends", e.agentKey, nil, nil, 200},
		{http.MethodGet, "/v1/spends/" + id, e.owner.TestKey, nil, nil, 200},
		{http.MethodGet, "/v1/balance", e.agentKey, nil, nil, 200},
		{http.MethodGet, "/v1/policy", e.agentKey, nil, nil, 200},
		{http.MethodGet, "/v1/me", e.owner.TestKey, nil, nil, 200},
		{http.MethodGet, "/v1/events", e.agentKey, nil, nil, 200},
		{http.MethodGet, "/v1/agents/" + e.agentID, e.owner.TestKey, nil, nil, 200},
		{http.MethodGet, "/v1/agents/" + e.agentID + "/policy", e.owner.TestKey, nil, nil, 200},
		{http.MethodPost, "/v1/agents/" + e.agentID + "/destinations", e.owner.TestKey, nil, `{"pattern":"x.example.org","list":"blocked"}`, 200},
		// Errors of keyed routes: before the handler and inside it.
		{http.MethodGet, "/v1/me", "", nil, nil, 401},
		{http.MethodGet, "/v1/balance", e.owner.TestKey, nil, nil, 403},
		{http.MethodGet, "/v1/me", e.agentKey, map[string]string{"Service-Version": "2020-01-01"}, nil, 400},
		{http.MethodPost, "/v1/spends", e.agentKey, nil, spendBody("0.10", "api.vendor.com", "/r"), 400},
		{http.MethodGet, "/v1/spends/spd_00000000000000000000000000000000", e.agentKey, nil, nil, 404},
		{http.MethodPost, "/v1/spends/" + id + "/cancel", e.agentKey, nil, nil, 409},
		// A body over 16 KiB, cut by the HTTP layer before any route ran.
		{http.MethodPost, "/v1/spends", e.agentKey, map[string]string{"Idempotency-Key": newKey()}, oversizeSpendBody(), 413},
		{http.MethodPost, "/v1/spends/check", e.agentKey, nil, oversizeSpendBody(), 413},
	} {
		what := c.method + " " + c.path
		r := call(t, s, c.method, c.path, c.key, c.headers, c.body)
		if r.Status != c.status {
			t.Errorf("%s answered %d, want %d: %s", what, r.Status, c.status, r.Raw)
			continue
		}
		rt := rateOf(t, r)
		if rt.limit <= 0 || rt.retryAfter != 0 {
			t.Errorf("%s: rate headers %+v", what, rt)
		}
	}
	for _, path := range publicPaths {
		r := call(t, s, http.MethodGet, path, e.agentKey, nil, nil)
		mustStatus(t, r, http.StatusOK)
		if rt := rateOf(t, r); rt.limit <= 0 || rt.retryAfter != 0 {
			t.Errorf("GET %s: rate headers %+v", path, rt)
		}
	}
	noRateHeaders(t, "GET /v1/nothing", call(t, s, http.MethodGet, "/v1/nothing", e.agentKey, nil, nil))
	// With an oversize body a bad key is still a 401.
	wantError(t, call(t, s, http.MethodPost, "/v1/spends", "svc_test_agent_nope", map[string]string{"Idempotency-Key": newKey()}, oversizeSpendBody()),
		http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")

	off := start(t, guardtest.WithoutContract(), guardtest.WithConfig(func(c *wire.Config) { c.RateLimits = false }))
	r := call(t, off.srv, http.MethodGet, "/v1/me", off.agentKey, nil, nil)
	mustStatus(t, r, http.StatusOK)
	noRateHeaders(t, "GET /v1/me with limits off", r)
	for range 40 {
		r = call(t, off.srv, http.MethodGet, "/v1/me", "svc_test_agent_nope", nil, nil)
		wantError(t, r, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "")
	}
	noRateHeaders(t, "401 with limits off", r)
	for _, path := range publicPaths {
		r = call(t, off.srv, http.MethodGet, path, "", nil, nil)
		mustStatus(t, r, http.StatusOK)
		noRateHeaders(t, "GET "+path+" with limits off", r)
	}
	// A route that does not exist answers an oversize body with 413 (the
	// contract has no such route to hold the answer to).
	wantError(t, call(t, off.srv, http.MethodPost, "/v1/nothing", off.agentKey, nil, oversizeSpendBody()),
		http.StatusRequestEntityTooLarge, "invalid_request_error", "body_too_large", "")
}

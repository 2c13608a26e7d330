package transport

import (
	"strconv"
	"sync"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/ratelimit"
)

// Rate limits on the wire (spec 4, 5.6 and 8.1).
//
// Which limits a request passes:
//   - every request with a valid key: Key, per key id;
//   - POST /v1/spends: also Spends and SpendsDaily, per agent;
//   - POST /v1/spends/check: also Check, per agent;
//   - owner administration writes (webhook endpoints included): also
//     AdminWrites, per key; creating or rotating a key also KeyChanges,
//     per owner, given back when no key is made (see keyChange).
//     Revoking a key does not count against KeyChanges: an owner with a
//     leaked key must never find revocation used up for the day;
//   - practice controls (/v1/test/*): also PracticeControl, per owner;
//     disabled in live, where those routes answer 404;
//   - a missing or invalid key: InvalidKey, per client IP, counted on
//     every 401; once it is used up the answer is 429 instead;
//   - the routes that need no key (GET /healthz, /.well-known/jwks.json,
//     /v1/openapi.json): Public, per client IP, shared by the three and
//     counted before anything else, a key sent with the request or a
//     refused version pin included, so that every answer of theirs
//     carries the RateLimit headers (spec 4). Its values are generous
//     (see ratelimit.DefaultTable): health probes and receipt key caches
//     never meet it, a client asking without pause does.
//
// The limits are taken in that order and the first refusal stops: a
// request refused by Key takes nothing from Spends, one refused by Spends
// (which refills in seconds) nothing from SpendsDaily (a window of a
// day), and one refused by SpendsDaily gets its Spends token back, so
// that its Retry-After is the daily limit's and the next try is not
// refused by the minute's instead. SpendsDaily counts the payments
// requested, as its recall after a restart does (the spends stored): a
// request that creates no spend (a replay, or 4xx) gets its token back
// (see spendsDaily). The RateLimit headers report the most constraining limit the
// request passed, the one with the fewest requests left, or the one that
// refused it. A path that is no route (404) is not limited and sends no
// RateLimit headers; neither does an answer to a key that could not be
// checked at all (the journal was unreadable: 503). A body whose
// Content-Length is over 16 KiB is counted like any other request of its
// route, and its 413 carries the headers; a chunked body found too long
// while being read does not (see transportError).
//
// InvalidKey is one window per IP whatever environment the bad key
// claims, so alternating prefixes does not double the attempts. Public is
// likewise one bucket per IP: a request without a key has no environment.
// Both are counted in the practice column of the table, whose live one
// holds the same values.

// sweepInterval is how often idle buckets are dropped (ratelimit.Sweep).
const sweepInterval = time.Minute

// limit takes one token from each named limit of the caller, in order,
// and answers 429 at the first refusal. It records the decision the
// RateLimit headers report and writes those headers, so that the answer
// carries them whatever it turns out to be.
func (s *Server) limit(c *call, names ...ratelimit.Name) *apiError {
	if s.limits == nil {
		return nil
	}
	for i, n := range names {
		d := s.limits.Allow(n, c.who.Livemode, subject(n, c.who))
		if d.Disabled {
			// A limit of 0 marks a route absent from an environment
			// (practice control in live); no route here passes such a
			// limit, so there is nothing to count.
			continue
		}
		if !d.Allowed {
			// The request does not happen: what the limits before this
			// one took is given back.
			for _, taken := range names[:i] {
				s.limits.Refund(taken, c.who.Livemode, subject(taken, c.who))
			}
			setRate(c, n, d)
			return rateLimited(n, c.who.Livemode, d)
		}
		if !c.hasRate || tighter(d, c.rate) {
			setRate(c, n, d)
		}
	}
	return nil
}

// invalidKey counts a missing or invalid key against the client's IP and
// returns the answer: e (401) while the IP has attempts left, 429 once it
// has none.
func (s *Server) invalidKey(c *call, e *apiError) *apiError {
	if err := s.limitIP(c, ratelimit.InvalidKey); err != nil {
		return err
	}
	return e
}

// limitIP takes one token from limit n for the client's IP, the subject
// of the limits a request without a valid key passes, and answers 429
// when there is none. It is the only limit such a request passes, so its
// decision is the one the RateLimit headers report.
func (s *Server) limitIP(c *call, n ratelimit.Name) *apiError {
	if s.limits == nil {
		return nil
	}
	d := s.limits.Allow(n, false, c.ctx.RemoteIP().String())
	setRate(c, n, d)
	if !d.Allowed {
		return rateLimited(n, false, d)
	}
	return nil
}

// subject is what limit n counts for principal p (see ratelimit.Name).
func subject(n ratelimit.Name, p actors.Principal) string {
	switch n {
	case ratelimit.Spends, ratelimit.SpendsDaily, ratelimit.Check:
		if p.AgentID != "" {
			return p.AgentID
		}
	case ratelimit.KeyChanges, ratelimit.PracticeControl:
		return p.OwnerID
	}
	return p.KeyID
}

// tighter reports whether a leaves fewer requests than b; on a tie, the
// one that takes longer to refill.
func tighter(a, b ratelimit.Decision) bool {
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.Reset > b.Reset
}

// setRate makes d the decision the RateLimit headers report. wrap writes
// them once the route has answered, so a request that passes several
// limits writes its headers once.
func setRate(c *call, n ratelimit.Name, d ratelimit.Decision) {
	c.rate, c.rateName, c.hasRate = d, n, true
}

// keyChange is a route that creates or rotates a key: it passes
// KeyChanges, a small daily allowance of keys made. A request that makes
// no key (refused with 400, 404 or 409: bad input, an unknown agent, the
// quota of active keys) gets its token back, so that mistakes do not use
// up the day. An answer of 5xx keeps it: the key may have been made.
func (s *Server) keyChange(h handler) handler {
	return s.giveBack(ratelimit.KeyChanges, func(status int) bool { return status < 400 || status >= 500 }, h)
}

// spendsDaily is POST /v1/spends: its SpendsDaily token is given back
// unless the request created a spend (201), so that replays of a payment
// and requests refused with 4xx do not use up the agent's day. An answer of
// 5xx keeps it: the spend may have been made.
func (s *Server) spendsDaily(h handler) handler {
	return s.giveBack(ratelimit.SpendsDaily, func(status int) bool { return status == 201 || status >= 500 }, h)
}

// giveBack runs h and refunds the token of limit n it took unless the
// answer's status says h did (or may have done) what n counts.
func (s *Server) giveBack(n ratelimit.Name, done func(status int) bool, h handler) handler {
	return func(c *call) *apiError {
		err := h(c)
		if s.limits == nil {
			return err
		}
		status := c.ctx.Response.StatusCode()
		if err != nil {
			status = err.status()
		}
		if !done(status) {
			s.limits.Refund(n, c.who.Livemode, subject(n, c.who))
			if c.hasRate && c.rateName == n {
				c.rate.Remaining++
			}
		}
		return err
	}
}

// writeRate writes the RateLimit headers of the decision c reports.
func writeRate(c *call) {
	if !c.hasRate || c.rate.Disabled {
		return
	}
	var buf [20]byte
	h := &c.ctx.Response.Header
	h.SetCanonical(hdrRateLimit, strconv.AppendInt(buf[:0], int64(c.rate.Limit), 10))
	h.SetCanonical(hdrRateRemaining, strconv.AppendInt(buf[:0], int64(c.rate.Remaining), 10))
	h.SetCanonical(hdrRateReset, strconv.AppendInt(buf[:0], c.rate.ResetSeconds(), 10))
}

// The RateLimit header names as the server writes them: fasthttp's
// normalized form of RateLimit-Limit and so on (header names are
// case-insensitive; clients match them so). Set in this form, they are not
// normalized again on every answer.
var (
	hdrRateLimit     = []byte("Ratelimit-Limit")
	hdrRateRemaining = []byte("Ratelimit-Remaining")
	hdrRateReset     = []byte("Ratelimit-Reset")
)

// rateLimited is the 429 for a refusal by limit n.
func rateLimited(n ratelimit.Name, livemode bool, d ratelimit.Decision) *apiError {
	_, _, _, retry := d.Headers()
	secs, _ := strconv.Atoi(retry)
	env := "practice"
	if livemode {
		env = "live"
	}
	wait := "1 second"
	if secs != 1 {
		wait = retry + " seconds"
	}
	l := describeLimit(n)
	// The pace as spec 8.1 states it, with the burst on top of it.
	pace := strconv.Itoa(d.Rate) + " per " + l.window
	if burst := d.Limit - d.Rate; burst > 0 {
		pace += " with a burst of " + strconv.Itoa(burst) + " (" + strconv.Itoa(d.Limit) + " at once)"
	}
	msg := "Rate limit reached: " + l.what + ", " + pace
	switch n {
	case ratelimit.InvalidKey:
		msg += ". Check the key you send ('Authorization: Bearer svc_...')"
	case ratelimit.Public:
		// No key, so no environment to name.
	default:
		msg += " (" + env + ")"
	}
	msg += ". Retry after " + wait + " (Retry-After); RateLimit-Remaining tells what is left."
	return &apiError{code: codeRateLimited, message: msg, retryAfter: max(secs, 1)}
}

// limitText is how a 429 names a limit.
type limitText struct{ what, window string }

// limitTexts names each limit, with its window from the default table
// (scaling changes rates, never windows).
var limitTexts = sync.OnceValue(func() map[ratelimit.Name]limitText {
	what := map[ratelimit.Name]string{
		ratelimit.Key:             "requests with this key",
		ratelimit.Spends:          "payment requests (POST /v1/spends) of this agent",
		ratelimit.SpendsDaily:     "payment requests (POST /v1/spends) of this agent in a day",
		ratelimit.Check:           "spend checks (POST /v1/spends/check) of this agent",
		ratelimit.AdminWrites:     "administration writes with this key",
		ratelimit.KeyChanges:      "keys created or rotated by this owner",
		ratelimit.PracticeControl: "practice control requests of this owner",
		ratelimit.InvalidKey:      "requests with a missing or invalid key from this IP address",
		ratelimit.Public:          "requests to the routes that need no key (GET /healthz, /.well-known/jwks.json, /v1/openapi.json) from this IP address",
	}
	t := ratelimit.DefaultTable()
	out := make(map[ratelimit.Name]limitText, len(what))
	for n, w := range what {
		out[n] = limitText{what: w, window: windowText(t.Practice[n].Window)}
	}
	return out
})

func describeLimit(n ratelimit.Name) limitText {
	if l, ok := limitTexts()[n]; ok {
		return l
	}
	return limitText{what: "requests (" + string(n) + ")", window: "window"}
}

// windowText says a window the way a person does: "minute", "10 minutes".
func windowText(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d >= u.d && d%u.d == 0 {
			if n := d / u.d; n > 1 {
				return strconv.FormatInt(int64(n), 10) + " " + u.name + "s"
			}
			return u.name
		}
	}
	return d.String()
}

// sweeper drops idle buckets from a limiter periodically, until stopped.
type sweeper struct {
	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func startSweeper(l *ratelimit.Limiter, every time.Duration) *sweeper {
	sw := &sweeper{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(sw.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-sw.quit:
				return
			case <-tick.C:
				l.Sweep()
			}
		}
	}()
	return sw
}

// stop ends the sweeper and waits for it; safe to call more than once and
// on a nil sweeper (limiting off).
func (sw *sweeper) stop() {
	if sw == nil {
		return
	}
	sw.stopOnce.Do(func() { close(sw.quit) })
	<-sw.done
}

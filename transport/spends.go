package transport

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// Field limits (spec 8.2).
const (
	maxMemo            = 280
	maxClientReference = 64
	maxDestination     = 253
	maxURL             = 2048
	maxIdempotencyKey  = 255
	maxWaitSeconds     = 20
	spendTimeout       = 45 * time.Second
)

type spendBody struct {
	Amount          *string       `json:"amount"`
	Currency        *string       `json:"currency"`
	Destination     *string       `json:"destination"`
	Resource        *resourceBody `json:"resource"`
	Memo            *string       `json:"memo"`
	ClientReference *string       `json:"client_reference"`
}

type resourceBody struct {
	URL    *string `json:"url"`
	Method *string `json:"method"`
}

var methods = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "HEAD": true}

func requireJSON(c *call) *apiError {
	ct := string(c.ctx.Request.Header.ContentType())
	mt, _, _ := strings.Cut(ct, ";")
	if strings.TrimSpace(strings.ToLower(mt)) != "application/json" {
		return badParam(codeContentType, "Content-Type", "Send the body as JSON with 'Content-Type: application/json'.")
	}
	return nil
}

// parseAmount applies the wire rule and the "> 0" rule of a spend amount.
func parseAmount(param, s string) (policy.Amount, *apiError) {
	a, err := policy.ParseAmount(s)
	if err != nil {
		return a, badParam(codeAmountInvalid, param, param+": "+amountProblem(err))
	}
	if a.Sign() <= 0 {
		return a, badParam(codeAmountInvalid, param, param+" must be greater than 0.")
	}
	return a, nil
}

func amountProblem(err error) string {
	if ae, ok := err.(*policy.AmountError); ok {
		return ae.Problem
	}
	return err.Error()
}

func idempotencyKey(c *call) (string, *apiError) {
	k := c.ctx.Request.Header.Peek("Idempotency-Key")
	if len(k) == 0 {
		return "", badParam(codeIdemMissing, "Idempotency-Key",
			"Send an Idempotency-Key header (1-255 printable ASCII characters, for example a UUID) so a retry cannot pay twice.")
	}
	if n := len(c.ctx.Request.Header.PeekAll("Idempotency-Key")); n > 1 {
		return "", badParam(codeIdemInvalid, "Idempotency-Key",
			fmt.Sprintf("Send one Idempotency-Key header; this request has %d, and a retry must name the same payment.", n))
	}
	if len(k) > maxIdempotencyKey {
		return "", badParam(codeIdemInvalid, "Idempotency-Key", "The Idempotency-Key is longer than 255 characters; use a shorter one, such as a UUID.")
	}
	for _, b := range k {
		if b < 0x20 || b > 0x7e {
			return "", badParam(codeIdemInvalid, "Idempotency-Key", "The Idempotency-Key must be printable ASCII only.")
		}
	}
	return string(k), nil
}

// validateSpend turns a body into a SpendInput or says what to fix.
func validateSpend(b *spendBody, livemode bool) (actors.SpendInput, *apiError) {
	var in actors.SpendInput
	if b.Amount == nil {
		return in, badParam(codeParameterMissing, "amount", `amount is required: the most you accept to pay, as a decimal string like "0.50".`)
	}
	amt, aerr := parseAmount("amount", *b.Amount)
	if aerr != nil {
		return in, aerr
	}
	in.Amount = amt
	in.Currency = "usdc"
	if b.Currency != nil && *b.Currency != "usdc" {
		return in, badParam(codeCurrency, "currency", `currency must be "usdc" (or omitted); no other currency is supported.`)
	}
	if b.Destination == nil {
		return in, badParam(codeParameterMissing, "destination", "destination is required: the vendor's host name, like \"api.vendor.com\".")
	}
	dest := *b.Destination
	if dest == "" || utf8.RuneCountInString(dest) > maxDestination {
		return in, badParam(codeParameterInvalid, "destination", "destination must be a host name of 1 to 253 characters.")
	}
	in.Destination = dest
	canonical, herr := policy.CanonicalHost(dest)
	if b.Resource == nil {
		if herr == nil {
			return in, badParam(codeResourceMissingBody, "resource",
				"resource is required for a domain destination: send {\"url\": \"https://"+canonical+"/...\", \"method\": \"GET\"}.")
		}
		// Not a host at all: the rules decline it; the resource shows what
		// was asked for, with the default method.
		in.Resource = policy.Resource{Host: strings.ToLower(dest), Path: "/", Method: "GET"}
	} else {
		res, u, rerr := validateResource(b.Resource, dest, canonical, herr == nil, livemode)
		if rerr != nil {
			return in, rerr
		}
		in.Resource, in.URL = res, u
	}
	if b.Memo != nil {
		if utf8.RuneCountInString(*b.Memo) > maxMemo {
			return in, badParam(codeParameterInvalid, "memo", "memo is longer than 280 characters; shorten it.")
		}
		if !utf8.ValidString(*b.Memo) {
			return in, badParam(codeParameterInvalid, "memo", "memo must be valid UTF-8 text.")
		}
		in.Memo = *b.Memo
	}
	if b.ClientReference != nil {
		if n := utf8.RuneCountInString(*b.ClientReference); n == 0 || n > maxClientReference {
			return in, badParam(codeParameterInvalid, "client_reference", "client_reference must be 1 to 64 characters.")
		}
		cr := *b.ClientReference
		in.ClientReference = &cr
	}
	return in, nil
}

func validateResource(r *resourceBody, dest, canonical string, destValid, livemode bool) (policy.Resource, string, *apiError) {
	var res policy.Resource
	if r.URL == nil {
		return res, "", badParam(codeParameterMissing, "resource.url", "resource.url is required: the absolute https URL you are buying.")
	}
	raw := *r.URL
	if utf8.RuneCountInString(raw) > maxURL {
		return res, "", badParam(codeParameterInvalid, "resource.url", "resource.url is longer than 2048 characters; shorten it.")
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return res, "", badParam(codeParameterInvalid, "resource.url", "resource.url must be an absolute URL like \"https://"+canonicalOr(canonical, dest)+"/path\".")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if livemode {
			return res, "", badParam(codeParameterInvalid, "resource.url", "resource.url must use https in live mode.")
		}
	default:
		return res, "", badParam(codeParameterInvalid, "resource.url", "resource.url must use https (http is accepted only with practice keys).")
	}
	if u.User != nil {
		return res, "", badParam(codeParameterInvalid, "resource.url", "resource.url must not carry a user name or password; remove the part before '@'.")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return res, "", badParam(codeParameterInvalid, "resource.url", "resource.url must not carry a fragment; remove the part after '#'.")
	}
	if p := u.Port(); p != "" && !(p == "443" && u.Scheme == "https" || p == "80" && u.Scheme == "http") {
		return res, "", badParam(codeParameterInvalid, "resource.url", "resource.url must not carry a port; the destination is a host name only.")
	}
	host := strings.ToLower(u.Hostname())
	if destValid {
		if ch, err := policy.CanonicalHost(host); err != nil || ch != canonical {
			return res, "", badParam(codeHostMismatch, "resource.url", "The host of resource.url ("+host+") must equal destination ("+canonical+").")
		}
		host = canonical
	} else if host != strings.ToLower(dest) {
		return res, "", badParam(codeHostMismatch, "resource.url", "The host of resource.url ("+host+") must equal destination ("+clip(dest, 60)+").")
	}
	method := "GET"
	if r.Method != nil {
		method = *r.Method
		if !methods[method] {
			return res, "", badParam(codeParameterInvalid, "resource.method", "resource.method must be one of GET, POST, PUT, PATCH, DELETE, HEAD (upper case).")
		}
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	// The fingerprint's URL: scheme, canonical host and path as the vendor
	// will see them, so a retry that spells the host differently is the
	// same request.
	return policy.Resource{Host: host, Path: path, Method: method}, u.Scheme + "://" + host + path, nil
}

func canonicalOr(c, d string) string {
	if c != "" {
		return c
	}
	return "vendor.example"
}

func (s *Server) createSpend(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	key, ierr := idempotencyKey(c)
	if ierr != nil {
		return ierr
	}
	var body spendBody
	if err := decodeStrict(c.ctx.PostBody(), &body); err != nil {
		return err
	}
	in, verr := validateSpend(&body, c.who.Livemode)
	if verr != nil {
		return verr
	}
	in.IdempotencyKey = key
	ctx, cancel := requestContext(spendTimeout)
	defer cancel()
	r, err := s.sys.CreateSpend(ctx, c.who, in)
	if err != nil {
		return fromActors(err)
	}
	status := fasthttp.StatusCreated
	extra := `"idempotent_replay":false,`
	if r.Replay {
		status, extra = fasthttp.StatusOK, `"idempotent_replay":true,`
	}
	writeObject(c.ctx, status, c.reqID, r.Body, []byte(extra))
	return nil
}

func (s *Server) getSpend(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if id == "check" {
		// The path of the check, asked with the wrong method: say so
		// rather than that no spend "check" exists.
		return badParam(codeRouteNotFound, "", "No route "+string(c.ctx.Method())+" /v1/spends/check exists; the check is POST /v1/spends/check.")
	}
	if name, ok := unknownParam(c, "wait_seconds"); ok {
		return badParam(codeParameterUnknown, clip(name, 40), clip(name, 40)+" is not a parameter of GET /v1/spends/{id}; its only one is wait_seconds (a whole number from 0 to 20).")
	}
	if len(c.ctx.QueryArgs().PeekMulti("wait_seconds")) > 1 {
		return repeatedParam("wait_seconds")
	}
	var wait time.Duration
	if w := c.ctx.QueryArgs().Peek("wait_seconds"); w != nil {
		n, ok := wholeNumber(w)
		if !ok || n > maxWaitSeconds {
			return badParam(codeParameterInvalid, "wait_seconds", "wait_seconds must be a whole number from 0 to 20.")
		}
		wait = time.Duration(n) * time.Second
	}
	// Derived from waits: a shutdown ends the wait (GetSpend then answers
	// with the spend as it is).
	ctx, cancel := context.WithTimeout(s.waits, wait+5*time.Second)
	defer cancel()
	body, err := s.sys.GetSpend(ctx, c.who, id, wait)
	if err != nil {
		return fromActors(err)
	}
	writeObject(c.ctx, 200, c.reqID, body, []byte(`"idempotent_replay":false,`))
	return nil
}

func (s *Server) cancelSpend(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	if err := optionalEmptyBody(c); err != nil {
		return err
	}
	ctx, cancel := requestContext(spendTimeout)
	defer cancel()
	r, err := s.sys.CancelSpend(ctx, c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeObject(c.ctx, 200, c.reqID, r.Body, []byte(`"idempotent_replay":false,`))
	return nil
}

type checkBody struct {
	Destination *string `json:"destination"`
	Amount      *string `json:"amount"`
	Currency    *string `json:"currency"`
}

// checkMembers are checkBody's members, in the order of the arrays
// readCheckBody returns (indexed by checkDestination and so on).
var checkMembers = []string{"destination", "amount", "currency"}

const (
	checkDestination = iota
	checkAmount
	checkCurrency
)

// readCheckBody decodes a check body: in one pass when it is the plain
// shape agents send, otherwise through decodeStrict.
func readCheckBody(raw []byte) (vals [3]string, set [3]bool, _ *apiError) {
	if decodeFlatStrings(raw, checkMembers, vals[:], set[:]) && utf8.Valid(raw) {
		return vals, set, nil
	}
	var body checkBody
	if err := decodeStrict(raw, &body); err != nil {
		return vals, set, err
	}
	for i, p := range []*string{body.Destination, body.Amount, body.Currency} {
		if p != nil {
			vals[i], set[i] = *p, true
		}
	}
	return vals, set, nil
}

func (s *Server) checkSpend(c *call) *apiError {
	if err := requireJSON(c); err != nil {
		return err
	}
	vals, set, err := readCheckBody(c.ctx.PostBody())
	if err != nil {
		return err
	}
	if !set[checkDestination] {
		return badParam(codeParameterMissing, "destination", "destination is required: the vendor's host name.")
	}
	destination := vals[checkDestination]
	if destination == "" || utf8.RuneCountInString(destination) > maxDestination {
		return badParam(codeParameterInvalid, "destination", "destination must be a host name of 1 to 253 characters.")
	}
	if set[checkCurrency] && vals[checkCurrency] != "usdc" {
		return badParam(codeCurrency, "currency", `currency must be "usdc" (or omitted).`)
	}
	var amount *policy.Amount
	if set[checkAmount] {
		a, aerr := parseAmount("amount", vals[checkAmount])
		if aerr != nil {
			return aerr
		}
		amount = &a
	}
	// Reads answer from the agent's published snapshot; only a passivated
	// agent is activated first, and that wait is bounded by the actors'
	// own request timeout. No timer per request: these are the hot reads.
	r, cerr := s.sys.Check(c.ctx, c.who, destination, amount)
	if cerr != nil {
		return fromActors(cerr)
	}
	writeCheck(c.ctx, c.reqID, &r)
	return nil
}

// noParams refuses any query parameter on a route that takes none (spec
// 4.7). Ignoring one would answer a question the caller did not ask:
// GET /v1/policy?agent_id=... answered for the key's own agent. hint says
// what the route answers instead.
func noParams(c *call, route, hint string) *apiError {
	if name, ok := unknownParam(c); ok {
		return badParam(codeParameterUnknown, clip(name, 40), route+" takes no parameters; remove "+clip(name, 40)+". "+
			strings.ToUpper(hint[:1])+hint[1:])
	}
	return nil
}

// noQuery wraps the handler of a route that takes no query parameters, so
// that one sent anyway is refused rather than ignored: ignoring it would
// carry out a request the caller did not make. POST /v1/spends?dry_run=true
// paid, and POST /v1/spends/check?amount=1000 checked no amount at all.
func noQuery(h handler) handler {
	return func(c *call) *apiError {
		if name, ok := unknownParam(c); ok {
			where := " (fields of a request go in its JSON body)."
			if c.ctx.IsGet() || c.ctx.IsHead() || c.ctx.IsDelete() {
				where = " (the resource is named by the path alone)."
			}
			return badParam(codeParameterUnknown, clip(name, 40), string(c.ctx.Method())+" "+clip(string(c.ctx.Path()), 80)+
				" takes no query parameters; remove "+clip(name, 40)+where)
		}
		return h(c)
	}
}

// unknownParam returns the first query parameter whose name is not one of
// known.
func unknownParam(c *call, known ...string) (string, bool) {
	args := c.ctx.QueryArgs()
	if args.Len() == 0 {
		return "", false
	}
	for k := range args.All() {
		if !slices.Contains(known, string(k)) {
			return string(k), true
		}
	}
	return "", false
}

// repeatedParam refuses a query parameter given more than once: which of
// the values counts would be a guess (the first? the last? all of them?).
func repeatedParam(name string) *apiError {
	name = clip(name, 40)
	return badParam(codeParameterInvalid, name, name+" is given more than once; send it once.")
}

func (s *Server) balance(c *call) *apiError {
	if err := noParams(c, "GET /v1/balance", "it answers for the agent of the key."); err != nil {
		return err
	}
	b, err := s.sys.Balance(c.ctx, c.who) // see checkSpend for the context
	if err != nil {
		return fromActors(err)
	}
	writeBalance(c.ctx, c.reqID, &b)
	return nil
}

func (s *Server) agentPolicy(c *call) *apiError {
	if err := noParams(c, "GET /v1/policy", "it answers for the agent of the key (an owner reads any agent's with GET /v1/agents/{id}/policy)."); err != nil {
		return err
	}
	p, err := s.sys.Policy(c.who, c.who.AgentID)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, p)
	return nil
}

func (s *Server) receipt(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	r, err := s.sys.Receipt(c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, r)
	return nil
}

type keyView struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Prefix    string    `json:"prefix"`
	Last4     string    `json:"last4"`
	Scope     string    `json:"scope"`
	ExpiresAt time.Time `json:"expires_at"`
}

type agentView struct {
	actors.Agent
	RequestID string `json:"request_id"`
}

func (s *Server) me(c *call) *apiError {
	if err := noParams(c, "GET /v1/me", "it describes the key it is called with."); err != nil {
		return err
	}
	k := c.who.Key
	out := map[string]any{
		"object": "me", "livemode": c.who.Livemode, "api_version": APIVersion,
		"key":      keyView{ID: k.ID, Kind: k.Kind, Prefix: k.Prefix, Last4: k.Last4, Scope: k.Scope, ExpiresAt: k.ExpiresAt},
		"owner_id": c.who.OwnerID,
	}
	if c.who.Kind == actors.KindAgent {
		ag, err := s.sys.Agent(c.who, c.who.AgentID)
		if err != nil {
			return fromActors(err)
		}
		out["agent"] = agentView{Agent: ag, RequestID: c.reqID}
		out["policy_version"] = ag.PolicyVersion
		out["message"] = "This is an agent key of agent " + ag.ID + "; it can pay and read, never administer."
	} else {
		out["agent"] = nil
		out["policy_version"] = nil
		out["message"] = "This is an owner key; it administers agents, rules and keys and must never be given to an agent."
	}
	out["environment"] = string(c.who.Env())
	writeJSON(c.ctx, 200, c.reqID, out)
	return nil
}

func (s *Server) getApproval(c *call) *apiError {
	id, _ := c.ctx.UserValue("id").(string)
	a, err := s.sys.GetApproval(c.who, id)
	if err != nil {
		return fromActors(err)
	}
	writeJSON(c.ctx, 200, c.reqID, a)
	return nil
}

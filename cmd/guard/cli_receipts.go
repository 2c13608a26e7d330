package main

// guard receipts reads signed receipts and checks them the way any holder
// of a receipt can: against the public keys the server publishes, with
// nothing secret. The chain walk of "receipts verify" is in
// cli_receipts_verify.go.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport/receipt"
)

var receiptsGroup = cmdGroup{
	name: "receipts",
	summary: "Read and check signed receipts: each one's EdDSA signature against the server's public\n" +
		"keys (/.well-known/jwks.json), and the owner's tamper-evident chain of receipts, in which\n" +
		"each receipt names the hash of the one before it in the key's environment.",
	footer: commonUsage,
	cmds: []subcommand{
		{"get", "RECEIPT_ID [-jwks FILE]", "print a receipt's claims once its signature verifies", receiptsGet},
		{"verify", "[-agent AGENT_ID] [-limit N] [-jwks FILE]", "check the last 30 days' receipts: signatures and chain (-agent: signatures only)", receiptsVerify},
	},
}

// receiptView is a receipt as GET /v1/receipts/{id} answers it.
type receiptView struct {
	ID        string     `json:"id"`
	Object    string     `json:"object"`
	SpendID   string     `json:"spend_id"`
	AgentID   string     `json:"agent_id"`
	Livemode  bool       `json:"livemode"`
	JWS       string     `json:"jws"`
	KeyID     string     `json:"kid"`
	CreatedAt *time.Time `json:"created_at"`
}

// receiptKeySet is the JWKS receipts are checked with: the server's, or a
// file the user pinned with -jwks. The server's is fetched again, once,
// when a receipt names a key it lacks: a server restarted after a key
// rotation while a long walk ran publishes a key the first fetch did not
// have. A pinned set is never replaced: trusting it is its point.
type receiptKeySet struct {
	raw       []byte
	refetched bool
	source    string // "the server's JWKS" or "the JWKS in FILE"
}

// jwksFlag adds -jwks to the flags of a command that checks receipts.
func jwksFlag(fs *flag.FlagSet) *string {
	return fs.String("jwks", "", "check signatures with the public keys in `FILE` (a JWKS saved from a source you trust) instead of the server's /.well-known/jwks.json, which a server or proxy that altered receipts could alter too")
}

// receiptKeys is the pinned JWKS in file when one is given, else the
// server's.
func (c *cli) receiptKeys(file string) (*receiptKeySet, error) {
	if file == "" {
		return c.jwks()
	}
	raw, err := c.readJSONObject("jwks", file)
	if err != nil {
		return nil, err
	}
	if !hasKeys(raw) {
		return nil, fmt.Errorf("-jwks %s: holds no keys (want a JWKS: {\"keys\": [...]}, as /.well-known/jwks.json serves it)", file)
	}
	return &receiptKeySet{raw: raw, refetched: true, source: "the JWKS in " + file}, nil
}

// jwks fetches the public receipt keys.
func (c *cli) jwks() (*receiptKeySet, error) {
	raw, err := c.call(http.MethodGet, "/.well-known/jwks.json", nil, nil)
	if err != nil {
		return nil, err
	}
	if !hasKeys(raw) {
		return nil, errors.New("the server's /.well-known/jwks.json holds no receipt keys: no receipt can be verified")
	}
	return &receiptKeySet{raw: raw, source: "the server's JWKS"}, nil
}

// hasKeys reports whether raw is a JWKS with at least one key.
func hasKeys(raw []byte) bool {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	return json.Unmarshal(raw, &set) == nil && len(set.Keys) > 0
}

// fetchReceipt reads one receipt.
func (c *cli) fetchReceipt(id string) (receiptView, []byte, error) {
	var rc receiptView
	raw, err := c.getJSON("/v1/receipts/"+pathID(id), nil, &rc)
	return rc, raw, err
}

// checkReceipt verifies the token of rc, asked for as id, and that the
// receipt object says what its signed claims say: the object is not
// signed, the claims are. It returns the claims and the signing key's id;
// an error says why the receipt cannot be trusted.
func (c *cli) checkReceipt(keys *receiptKeySet, id string, rc receiptView) (policy.ReceiptClaims, string, error) {
	if rc.ID != id {
		return policy.ReceiptClaims{}, "", fmt.Errorf("asked for %s, the server answered receipt %q", id, rc.ID)
	}
	kid := tokenKeyID(rc.JWS)
	claims, err := receipt.Verify(rc.JWS, keys.raw)
	if errors.Is(err, receipt.ErrUnknownKey) && !keys.refetched {
		fresh, ferr := c.jwks()
		if ferr != nil {
			return policy.ReceiptClaims{}, kid, ferr
		}
		keys.raw, keys.refetched = fresh.raw, true
		claims, err = receipt.Verify(rc.JWS, keys.raw)
	}
	switch {
	case errors.Is(err, receipt.ErrSignature):
		return claims, kid, fmt.Errorf("the signature does not verify with key %s of %s: the token was altered, or the service did not sign it", kid, keys.source)
	case errors.Is(err, receipt.ErrUnknownKey):
		return claims, kid, fmt.Errorf("signed by key %q, which %s does not list (withdrawn, or never the service's)", kid, keys.source)
	case err != nil:
		return claims, kid, fmt.Errorf("the token is not a valid receipt: %w", err)
	}
	var diffs []string
	for _, d := range []struct {
		field          string
		object, signed any
	}{
		{"id", rc.ID, claims.ReceiptID},
		{"spend_id", rc.SpendID, claims.SpendID},
		{"agent_id", rc.AgentID, claims.AgentID},
		{"livemode", rc.Livemode, claims.Livemode},
		{"kid", rc.KeyID, kid},
	} {
		if d.object != d.signed {
			diffs = append(diffs, fmt.Sprintf("%s %v, signed %v", d.field, d.object, d.signed))
		}
	}
	if len(diffs) > 0 {
		return claims, kid, fmt.Errorf("the receipt object disagrees with its signed claims: %s", strings.Join(diffs, "; "))
	}
	return claims, kid, nil
}

// tokenKeyID reads the kid of a token's header without trusting it: ""
// when the header cannot be read. Verify checked the header already when
// the kid is used for more than a message.
func tokenKeyID(token string) string {
	head, _, _ := strings.Cut(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return ""
	}
	var h struct {
		Kid string `json:"kid"`
	}
	if json.Unmarshal(raw, &h) != nil {
		return ""
	}
	return h.Kid
}

// environment names the environment of a livemode flag.
func environment(livemode bool) string {
	if livemode {
		return "live"
	}
	return "practice"
}

func receiptsGet(c *cli, args []string) error {
	c.help = "Print a receipt's signed claims once its EdDSA signature verifies with the server's public\n" +
		"keys (/.well-known/jwks.json). A receipt that does not verify is an error (exit status 1).\n" +
		"-json prints the server's receipt object, after the same check."
	fs := c.flags()
	jwksFile := jwksFlag(fs)
	pos, err := c.parse(fs, args, "RECEIPT_ID")
	if err != nil {
		return err
	}
	id := strings.TrimSpace(pos[0])
	keys, err := c.receiptKeys(*jwksFile) // first: a bad -jwks is the user's to fix before anything is read
	if err != nil {
		return err
	}
	rc, raw, err := c.fetchReceipt(id)
	if err != nil {
		return err
	}
	claims, kid, err := c.checkReceipt(keys, id, rc)
	if err != nil {
		return fmt.Errorf("receipt %s: %w", id, err)
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	return c.printClaims(claims, kid)
}

// printClaims writes a verified receipt's claims for people.
func (c *cli) printClaims(cl policy.ReceiptClaims, kid string) error {
	prev := cl.PrevHash
	if prev == "" {
		prev = "(none: the first receipt of its owner's " + environment(cl.Livemode) + " chain)"
	}
	body := cl.BodySHA256
	if body == "" {
		body = "-"
	}
	issued := time.Unix(cl.IssuedAt, 0)
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	for _, row := range [][2]string{
		{"receipt", cl.ReceiptID},
		{"spend", cl.SpendID},
		{"agent", cl.AgentID},
		{"owner", cl.OwnerID},
		{"environment", environment(cl.Livemode)},
		{"amount", cl.Amount + " " + cl.Currency},
		{"amount settled", cl.AmountSettled + " " + cl.Currency},
		{"destination", cl.Destination},
		{"resource", cl.Resource.Method + " " + cl.Resource.Host + cl.Resource.Path},
		{"network", cl.Network},
		{"reference", cl.Reference},
		{"policy", fmt.Sprintf("version %d (%s)", cl.PolicyVersion, cl.PolicyHash)},
		{"result body", body},
		{"issued", when(&issued)},
		{"kid", kid},
		{"prev", prev},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(c.stdout, "signature valid (kid %s)\n", kid)
	return err
}

package approvallink

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// KeySize is the length of a link key in bytes.
const KeySize = 32

// version prefixes every payload so a future format can be told apart.
// l2 added the channel's revision; an l1 link is refused as malformed
// (links live no longer than their approval, an hour at most).
const version = "l2"

// Claims are what a link stands for.
type Claims struct {
	ApprovalID string // apr_…
	ItemsHash  string // the spend fingerprint the owner is shown
	Channel    string // "email" or "chat": the approver channel of the decision
	ChannelID  string // the notification channel the link was sent through
	// ChannelRevision is the channel's revision (its target) when the link
	// was sent: a link sent to a target the channel no longer has must not
	// decide.
	ChannelRevision int
	LinkID          string    // random, unique per link: the decision's reference
	ExpiresAt       time.Time // the approval's expires_at
}

// Errors of Verify. Each is safe to show the person holding the link.
var (
	ErrMalformed = errors.New("this approval link is incomplete or damaged; open the approval from the console instead")
	ErrForged    = errors.New("this approval link was not issued by this service")
	ErrExpired   = errors.New("this approval link has expired together with its approval")
)

// Signer mints and verifies links with one key.
type Signer struct{ key []byte }

// NewKey returns a fresh random key.
func NewKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// New returns a Signer for key, which must be KeySize bytes.
func New(key []byte) (*Signer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("approval link key: want %d bytes, got %d", KeySize, len(key))
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// Mint returns the token for c. A zero LinkID is filled with a random one.
func (s *Signer) Mint(c Claims) (string, Claims, error) {
	if c.LinkID == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", c, err
		}
		c.LinkID = "lnk_" + hex.EncodeToString(b[:])
	}
	for name, v := range map[string]string{"approval id": c.ApprovalID, "items hash": c.ItemsHash, "channel": c.Channel, "channel id": c.ChannelID, "link id": c.LinkID} {
		if v == "" || strings.Contains(v, "|") {
			return "", c, fmt.Errorf("approval link: %s must be set and must not contain '|'", name)
		}
	}
	if c.ChannelRevision < 1 {
		return "", c, fmt.Errorf("approval link: channel revision must be at least 1")
	}
	payload := strings.Join([]string{version, c.ApprovalID, c.ItemsHash, c.Channel, c.ChannelID,
		strconv.Itoa(c.ChannelRevision), c.LinkID, strconv.FormatInt(c.ExpiresAt.Unix(), 10)}, "|")
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(s.mac(payload)), c, nil
}

// Verify checks token at now and returns its claims.
func (s *Signer) Verify(token string, now time.Time) (Claims, error) {
	body, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 1024 {
		return Claims{}, ErrMalformed
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(body)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return Claims{}, ErrMalformed
	}
	// The MAC is checked before anything in the payload is trusted.
	if !hmac.Equal(mac, s.mac(string(payload))) {
		return Claims{}, ErrForged
	}
	f := strings.Split(string(payload), "|")
	if len(f) != 8 || f[0] != version {
		return Claims{}, ErrMalformed
	}
	rev, err1 := strconv.Atoi(f[5])
	exp, err2 := strconv.ParseInt(f[7], 10, 64)
	if err1 != nil || err2 != nil || rev < 1 {
		return Claims{}, ErrMalformed
	}
	c := Claims{ApprovalID: f[1], ItemsHash: f[2], Channel: f[3], ChannelID: f[4], ChannelRevision: rev, LinkID: f[6],
		ExpiresAt: time.Unix(exp, 0).UTC()}
	if !now.Before(c.ExpiresAt) {
		return c, ErrExpired
	}
	return c, nil
}

// Derive returns a key of its own for purpose, made from the signer's
// lasting key: other tokens that must outlive a restart (the console's
// known-browser cookie) get one without a second stored secret. The NUL
// byte keeps a purpose from reading as any link's payload.
func (s *Signer) Derive(purpose string) []byte {
	return s.mac("derive\x00" + purpose)
}

func (s *Signer) mac(payload string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(payload))
	return h.Sum(nil)
}

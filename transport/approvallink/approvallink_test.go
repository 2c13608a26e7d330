package approvallink

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func testSigner(t *testing.T) *Signer {
	t.Helper()
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMintVerifyRoundTrip(t *testing.T) {
	s := testSigner(t)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	in := Claims{ApprovalID: "apr_1", ItemsHash: "abc", Channel: "email", ChannelID: "ntc_1", ChannelRevision: 1, ExpiresAt: now.Add(15 * time.Minute)}
	tok, minted, err := s.Mint(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(minted.LinkID, "lnk_") {
		t.Fatalf("link id %q", minted.LinkID)
	}
	got, err := s.Verify(tok, now)
	if err != nil {
		t.Fatal(err)
	}
	if got != minted {
		t.Fatalf("claims %+v, want %+v", got, minted)
	}
	if _, err := s.Verify(tok, now.Add(15*time.Minute)); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
}

func TestVerifyRefusesForgeries(t *testing.T) {
	s := testSigner(t)
	now := time.Now()
	tok, _, err := s.Mint(Claims{ApprovalID: "apr_1", ItemsHash: "abc", Channel: "chat", ChannelID: "ntc_1", ChannelRevision: 1, ExpiresAt: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	other := testSigner(t)
	if _, err := other.Verify(tok, now); !errors.Is(err, ErrForged) {
		t.Fatalf("other key: %v, want ErrForged", err)
	}
	// Flip one character of the payload: the MAC no longer matches.
	b := []byte(tok)
	if b[3] == 'A' {
		b[3] = 'B'
	} else {
		b[3] = 'A'
	}
	if _, err := s.Verify(string(b), now); err == nil {
		t.Fatal("tampered payload accepted")
	}
	for _, bad := range []string{"", "nodot", "a.b", "!!.!!", strings.Repeat("a", 2000) + ".b"} {
		if _, err := s.Verify(bad, now); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func TestMintRefusesIncompleteClaims(t *testing.T) {
	s := testSigner(t)
	if _, _, err := s.Mint(Claims{ApprovalID: "apr_1", Channel: "email", ChannelID: "ntc_1"}); err == nil {
		t.Fatal("missing items hash accepted")
	}
	if _, _, err := s.Mint(Claims{ApprovalID: "apr|1", ItemsHash: "x", Channel: "email", ChannelID: "ntc_1"}); err == nil {
		t.Fatal("separator in a field accepted")
	}
	if _, _, err := s.Mint(Claims{ApprovalID: "apr_1", ItemsHash: "x", Channel: "email", ChannelID: "ntc_1"}); err == nil {
		t.Fatal("a link without its channel's revision accepted")
	}
	if _, err := New(make([]byte, 5)); err == nil {
		t.Fatal("short key accepted")
	}
}

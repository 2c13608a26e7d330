package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestPublic(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"1.1.1.1", true},
		{"2606:4700:4700::1111", true},
		{"127.0.0.1", false},
		{"127.8.9.10", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"fe80::1", false},
		{"fc00::1", false}, // unique local
		{"fd12:3456::1", false},
		{"100.64.0.1", false}, // carrier-grade NAT
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"::", false},
		{"224.0.0.1", false},
		{"ff02::1", false},
		{"255.255.255.255", false},
		{"192.0.2.1", false},
		{"198.18.0.1", false},
		{"::ffff:127.0.0.1", false}, // IPv4-mapped loopback
		{"::ffff:8.8.8.8", true},
		{"64:ff9b::a00:1", false}, // NAT64 of 10.0.0.1
		{"64:ff9b::808:808", true},
		{"2002:a9fe:a9fe::1", false}, // 6to4 of 169.254.169.254
		{"2002:808:808::1", true},
		{"2001:db8::1", false},
	} {
		if got := Public(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("Public(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}

func TestPublicHost(t *testing.T) {
	for host, want := range map[string]bool{
		"hooks.example.com": true, "localhost": false, "LocalHost": false, "api.localhost": false, "localhost.": false,
		"127.0.0.1": false, "::1": false, "169.254.169.254": false, "8.8.8.8": true, "::ffff:10.0.0.1": false,
		// IPv4 in the forms of inet_aton, which netip does not read.
		"127.1": false, "2130706433": false, "0177.0.0.1": false, "0x7f000001": false, "10.1.": false,
		"hooks.example.123abc": true, "x0x7f.example.com": true,
	} {
		if got := PublicHost(host); got != want {
			t.Errorf("PublicHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// The dialer refuses a loopback listener that a plain dialer reaches, and
// says why.
func TestDialerRefusesNonPublic(t *testing.T) {
	ln := loopbackListener(t)
	if c, err := (&net.Dialer{Timeout: time.Second}).Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatalf("a plain dialer cannot reach the listener: %v", err)
	} else {
		c.Close()
	}
	// By name too: localhost resolves to a loopback address.
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		_, err := Dialer(time.Second).DialContext(context.Background(), "tcp", addr)
		var refused *RefusedError
		if !errors.As(err, &refused) {
			t.Errorf("dial %s: %v, want a RefusedError", addr, err)
		}
	}
}

// Link-local, multicast and unspecified addresses are no receiver's, in
// any form; loopback, private and public ones may be.
func TestNoReceiver(t *testing.T) {
	for addr, want := range map[string]bool{
		"169.254.169.254": true, "::ffff:169.254.169.254": true, "fe80::1": true, "fd00:ec2::254": false,
		"224.0.0.1": true, "ff02::1": true, "0.0.0.0": true, "::": true,
		"127.0.0.1": false, "10.0.0.1": false, "192.168.1.1": false, "::1": false, "8.8.8.8": false,
	} {
		if got := NoReceiver(netip.MustParseAddr(addr)); got != want {
			t.Errorf("NoReceiver(%s) = %v, want %v", addr, got, want)
		}
	}
	for host, want := range map[string]bool{"169.254.169.254": true, "[fe80::1]": true, "fe80::1": true,
		"metadata.example.com": false, "127.0.0.1": false, "localhost": false} {
		if got := NoReceiverHost(host); got != want {
			t.Errorf("NoReceiverHost(%q) = %v, want %v", host, got, want)
		}
	}
}

// The local dialer reaches a loopback listener and refuses the metadata
// endpoint before any packet leaves.
func TestLocalDialer(t *testing.T) {
	ln := loopbackListener(t)
	c, err := LocalDialer(time.Second).DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("the local dialer cannot reach a loopback listener: %v", err)
	}
	c.Close()
	_, err = LocalDialer(time.Second).DialContext(context.Background(), "tcp", "169.254.169.254:80")
	var refused *RefusedError
	if !errors.As(err, &refused) || !refused.Local || !strings.Contains(err.Error(), "metadata") {
		t.Fatalf("dial 169.254.169.254: %v, want a RefusedError naming link-local addresses", err)
	}
}

// loopbackListener accepts and closes connections on a loopback port
// until the test ends.
func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

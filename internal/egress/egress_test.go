package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
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

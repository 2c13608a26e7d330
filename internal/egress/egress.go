package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// nonPublic lists the special-purpose ranges (IANA IPv4 and IPv6
// Special-Purpose Address Registries) that netip's predicates do not
// cover; loopback, private, link-local, multicast and unspecified
// addresses are refused by those.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use IPv4/IPv6 translation
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
}

// Prefixes of IPv6 addresses that carry an IPv4 address.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Public reports whether ip is a unicast address reachable from the
// internet at large. An IPv4 address written as IPv6 (::ffff:a.b.c.d) is
// judged as the IPv4 address; so is one embedded by NAT64 (64:ff9b::/96)
// or 6to4 (2002::/16), which a translating network would deliver to it.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return Public(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(ip):
			return Public(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	return true
}

// PublicHost reports whether host, as written in a URL, could be public:
// false for "localhost" and for an address literal that is not Public;
// true for any other name, whose addresses Dialer checks when it connects.
func PublicHost(host string) bool {
	if h := strings.ToLower(strings.TrimSuffix(host, ".")); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return false // RFC 6761: always this machine
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return Public(ip)
	}
	// A name whose last label is a number is an IPv4 address written in a
	// form netip does not read (127.1, 2130706433, 0177.0.0.1,
	// 0x7f000001), which some resolvers still turn into that address. No
	// public name ends in a numeric label (RFC 3696, section 2).
	h := strings.TrimSuffix(host, ".")
	return !numericLabel(h[strings.LastIndexByte(h, '.')+1:])
}

// numericLabel reports a label of decimal digits, or 0x and hex digits.
func numericLabel(l string) bool {
	if len(l) > 2 && (l[:2] == "0x" || l[:2] == "0X") {
		l = l[2:]
		return strings.Trim(l, "0123456789abcdefABCDEF") == ""
	}
	return l != "" && strings.Trim(l, "0123456789") == ""
}

// NoReceiver reports whether ip is an address no receiver of an owner's
// has, even one on this machine or its private network: link-local
// addresses (the cloud metadata endpoint 169.254.169.254 among them, and
// its IPv6 forms), multicast and the unspecified address. Deliveries that
// may go to local receivers (practice, or live with private targets
// allowed) still never go there.
func NoReceiver(ip netip.Addr) bool {
	ip = ip.Unmap()
	return !ip.IsValid() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified()
}

// NoReceiverHost reports whether host, as written in a URL, is an address
// literal NoReceiver refuses. A name is checked where it resolves, by
// LocalDialer.
func NoReceiverHost(host string) bool {
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && NoReceiver(ip)
}

// RefusedError is the error of a connection Dialer or LocalDialer would
// not make.
type RefusedError struct {
	Addr string
	// Local is set for LocalDialer's refusals, which concern link-local
	// and other addresses no receiver has.
	Local bool
}

func (e *RefusedError) Error() string {
	if e.Local {
		return fmt.Sprintf("the endpoint's address %s is link-local, multicast or unspecified (the cloud metadata endpoint is one); no delivery goes there", e.Addr)
	}
	return fmt.Sprintf("the endpoint's address %s is not public (loopback, private, link-local or reserved); deliveries of live events go only to public addresses", e.Addr)
}

// Dialer returns a dialer that connects only to Public addresses. The
// check is in Control, which sees each address after resolution, just
// before connecting.
func Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !Public(ap.Addr()) {
				return &RefusedError{Addr: address}
			}
			return nil
		}}
}

// LocalDialer returns a dialer for deliveries that may go to this machine
// or its private network, but never to an address NoReceiver refuses,
// whatever a name resolves to.
func LocalDialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || NoReceiver(ap.Addr()) {
				return &RefusedError{Addr: address, Local: true}
			}
			return nil
		}}
}

// Package egress decides which network addresses the service may send to
// on an owner's behalf (webhook deliveries of live environments).
//
// An owner chooses the URL; the service makes the request from inside its
// own network. Without a check, a webhook URL could reach what only the
// service can reach: a cloud metadata endpoint (169.254.169.254), a
// database on 10.0.0.0/8, the service's own loopback ports. Public
// reports whether an address is one anybody on the internet could reach,
// and Dialer refuses to connect anywhere else. The check runs on the
// address actually dialled, after name resolution, so a name that
// resolves to a private address (or starts to, between two deliveries)
// is refused too.
package egress

package transport_test

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/internal/guardtest"
)

// The server-side cost of the agent's hot reads, without sockets or a
// load generator: run with
//
//	go test -run '^$' -bench 'Reads' -benchmem ./transport
//
// ns/op is CPU per request when GOMAXPROCS workers run in parallel.
func BenchmarkReads(b *testing.B) {
	srv := guardtest.Start(b, guardtest.WithoutContract())
	owner := srv.NewOwner(b)
	// As the load of make bench: the destination is trusted, so a check
	// runs every rule and answers allowed.
	_, key := srv.NewAgent(b, owner.TestKey, `{"trusted_destinations":["api.vendor.com"]}`)
	h := srv.Service().Handler()
	for _, tc := range []struct {
		name, method, path, body string
	}{
		{"balance", "GET", "/v1/balance", ""},
		{"check", "POST", "/v1/spends/check", `{"destination":"api.vendor.com","amount":"1.00"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var req fasthttp.Request
				req.Header.SetMethod(tc.method)
				req.SetRequestURI(tc.path)
				req.Header.Set("Authorization", "Bearer "+key)
				if tc.body != "" {
					req.Header.SetContentType("application/json")
					req.SetBodyString(tc.body)
				}
				var ctx fasthttp.RequestCtx
				addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
				for pb.Next() {
					ctx.Init(&req, addr, nil)
					h(&ctx)
					if code := ctx.Response.StatusCode(); code != 200 {
						b.Fatalf("%s %s: %d %s", tc.method, tc.path, code, ctx.Response.Body())
					}
				}
			})
		})
	}
}

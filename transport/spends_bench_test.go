package transport_test

import (
	"bytes"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/cputime"
	"github.com/agentpay/guard/internal/guardtest"
)

// The server-side cost of a settled practice spend, without sockets or a
// load generator, with the journal's fdatasync on: run with
//
//	go test -run '^$' -bench 'Spends' -benchtime 20000x ./transport
//
// 64 requests are in flight at once, as in make bench, so the journal
// groups commits as it does under that load. cpu-µs/spend is the process's
// CPU time per settled spend: every goroutine of the service (committer,
// checkpointer, settlement workers), none of a socket's.
func BenchmarkSpends(b *testing.B) {
	srv := guardtest.Start(b, guardtest.WithoutContract(),
		guardtest.WithConfig(func(c *wire.Config) { c.PracticePool = "1000000000.00" }))
	// Limits the load never reaches, as in make bench: every spend is
	// approved and settles.
	const policy = `{"per_spend_limit":"10.00","approval_over":"10.00","daily_cap":"1000000.00",` +
		`"monthly_cap":"1000000.00","trusted_destinations":["api.vendor.com"]}`
	var keys []string
	for range 4 {
		owner := srv.NewOwner(b)
		for range 5 {
			_, key := srv.NewAgent(b, owner.TestKey, policy)
			keys = append(keys, "Bearer "+key)
		}
	}
	h := srv.Service().Handler()
	var worker atomic.Int64
	settled := []byte(`"status":"settled"`)
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	cpu0 := cputime.Process()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := worker.Add(1)
		var req fasthttp.Request
		var ctx fasthttp.RequestCtx
		addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000 + int(id)}
		var key, body []byte
		for n := int64(0); pb.Next(); n++ {
			key = strconv.AppendInt(append(strconv.AppendInt(key[:0], id, 10), '-'), n, 10)
			// Amounts from 0.01 to 9.99, never the practice vendor's magic
			// 98.00 or 99.00.
			body = append(body[:0], `{"amount":"`...)
			body = strconv.AppendInt(body, 1+(id*7+n)%9, 10)
			body = append(body, '.')
			body = strconv.AppendInt(body, 10+(id*13+n*3)%90, 10)
			body = append(body, `","destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/reports/`...)
			body = append(body, key...)
			body = append(body, `"}}`...)
			req.Reset()
			req.Header.SetMethod("POST")
			req.SetRequestURI("/v1/spends")
			req.Header.Set("Authorization", keys[(id+n)%int64(len(keys))])
			req.Header.SetContentType("application/json")
			req.Header.SetBytesV("Idempotency-Key", key)
			req.SetBody(body)
			ctx.Init(&req, addr, nil)
			h(&ctx)
			if code := ctx.Response.StatusCode(); code != 201 || !bytes.Contains(ctx.Response.Body(), settled) {
				b.Fatalf("POST /v1/spends: %d %s", code, ctx.Response.Body())
			}
		}
	})
	b.StopTimer()
	cpu := cputime.Process() - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/spend")
}

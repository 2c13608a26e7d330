package transport

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
)

// The request log: one line per answer, so that the request_id a caller
// quotes from an error body (or its Request-Id header) leads the operator
// to what happened. Answers of 5xx are always logged, at error level and
// with their cause, whatever Config.AccessLog says: they are the service's
// own failures, and a caller can do nothing about them but report them.
//
// The line names the route's pattern (/v1/spends/{id}), never the raw path
// or the query: console links carry signed tokens in their paths, and a
// log is read by more people than the owner.

// logAnswer writes the line of one answered request. who is the caller's
// key once it was checked (nil before, or on public routes); failure is
// the error the handler returned, if any.
func (s *Server) logAnswer(ctx *fasthttp.RequestCtx, reqID string, start time.Time, who *actors.Principal, failure *apiError) {
	status := ctx.Response.StatusCode()
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	} else if !s.cfg.AccessLog {
		return
	}
	log := s.log
	if level == slog.LevelInfo {
		log = s.cfg.AccessLogger
	}
	if !log.Enabled(context.Background(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("request_id", reqID),
		slog.String("method", string(ctx.Method())),
		slog.String("route", routeOf(ctx)),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(start)),
		slog.String("ip", ctx.RemoteIP().String()))
	if who != nil && who.KeyID != "" {
		attrs = append(attrs, slog.String("key", who.KeyID), slog.String("owner", who.OwnerID))
		if who.AgentID != "" {
			attrs = append(attrs, slog.String("agent", who.AgentID))
		}
	}
	if failure != nil {
		attrs = append(attrs, slog.String("code", failure.code))
		if failure.cause != nil {
			attrs = append(attrs, slog.String("err", failure.cause.Error()))
		}
	}
	msg := "request"
	if level == slog.LevelError {
		msg = "request failed"
	}
	log.LogAttrs(context.Background(), level, msg, attrs...)
}

// routeOf is the pattern of the route that answered, or, for a path no
// route takes, the path itself cut short (it reached no handler, so it
// names no resource a token could open).
func routeOf(ctx *fasthttp.RequestCtx) string {
	if r, ok := ctx.UserValue(router.MatchedRoutePathParam).(string); ok {
		return r
	}
	return "(no route) " + clip(string(ctx.Path()), 100)
}

// recoverAnswer turns a panic of a handler into a 500 with its stack in
// the log, instead of ending the process and every request in flight
// with it. Money is safe either way: the actors hold the state and the
// journal made it durable before any answer; a panic here is in the
// request's own work (decoding, encoding), which no other request shares.
func (s *Server) recoverAnswer(ctx *fasthttp.RequestCtx, reqID string, start time.Time) {
	v := recover()
	if v == nil {
		return
	}
	s.log.LogAttrs(context.Background(), slog.LevelError, "handler panicked",
		slog.String("request_id", reqID), slog.String("route", routeOf(ctx)),
		slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
	ctx.Response.Reset()
	ctx.Response.Header.SetCanonical(hdrRequestID, []byte(reqID))
	ctx.Response.Header.SetCanonical(hdrServiceVersion, apiVersionBytes)
	failure := &apiError{code: string(actors.CodeInternal), message: "An internal error occurred; report the request_id."}
	writeError(ctx, reqID, failure)
	s.logAnswer(ctx, reqID, start, nil, failure)
	s.observe(ctx, start)
}

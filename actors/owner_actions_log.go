package actors

import (
	"context"
	"log/slog"
)

// logOwnerAction writes the operator's log line for an owner's action that changes
// who may spend, or how much: keys made, rotated or revoked, agents paused
// or archived, rules published, approvals decided, a practice reset. The
// owner reads the same actions in the events feed; the operator of the
// service reads the log, where an incident is looked into without the
// owner's key. Only actions that took effect (durably) are logged; a
// refused one is in the request log with its error code.
func (s *System) logOwnerAction(action string, p Principal, attrs ...slog.Attr) {
	if !s.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	base := make([]slog.Attr, 0, 4+len(attrs))
	base = append(base, slog.String("action", action), slog.String("owner", p.OwnerID), slog.String("env", string(p.Env())))
	if p.KeyID != "" {
		base = append(base, slog.String("by_key", p.KeyID))
	} else {
		base = append(base, slog.String("by", "console"))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "owner action", append(base, attrs...)...)
}

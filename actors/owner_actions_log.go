package actors

import (
	"context"
	"log/slog"
)

// logOwnerAction writes the operator's log line for an owner's action that
// changes who may spend, or how much: keys made, rotated or revoked,
// agents paused or archived, rules published, approvals decided, a
// practice reset. The owner reads the same actions in the events feed; the
// operator of the service reads the log, where an incident is looked into
// without the owner's key. Only actions that took effect (durably) are
// logged; a refused one is in the request log with its error code.
func (s *System) logOwnerAction(action string, p Principal, attrs ...slog.Attr) {
	by := slog.String("by", "console")
	switch {
	case p.KeyID != "":
		by = slog.String("by_key", p.KeyID)
	case p.By != "":
		by = slog.String("by", p.By)
	}
	s.logAction(action, p.OwnerID, append([]slog.Attr{slog.String("env", string(p.Env())), by}, attrs...)...)
}

// logAction is logOwnerAction for the actions that come without a key's
// principal: a decision from a console page or a signed link, a console
// password set.
func (s *System) logAction(action, ownerID string, attrs ...slog.Attr) {
	if !s.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "owner action",
		append([]slog.Attr{slog.String("action", action), slog.String("owner", ownerID)}, attrs...)...)
}

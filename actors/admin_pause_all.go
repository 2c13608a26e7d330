package actors

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxPauseReasonLength bounds the reason of an emergency pause.
const MaxPauseReasonLength = 500

// EmergencyPause is the answer of PauseAll.
type EmergencyPause struct {
	Object   string  `json:"object"` // "emergency_pause"
	Livemode bool    `json:"livemode"`
	Reason   *string `json:"reason"`
	// Paused are the agents this call paused; AlreadyPaused those that
	// were paused before it (left as they were). Both sorted by id.
	Paused        []string `json:"paused"`
	PausedCount   int      `json:"paused_count"`
	AlreadyPaused []string `json:"already_paused"`
}

// PauseAll pauses every active agent of the owner's environment in one
// call, each exactly as a single pause does (agent.paused, pause_detail on
// the payments waiting for the owner), marked as an emergency with the
// owner's reason. Agents already paused stay as they are, so a repeated
// call pauses nothing more. Agents created after the call began are not
// paused. If some agent could not be paused (the journal failed, a
// practice reset was running), the others still are and the first error
// is returned: calling again pauses the rest.
func (s *System) PauseAll(ctx context.Context, p Principal, reason *string) (EmergencyPause, error) {
	if p.Kind != KindOwner {
		return EmergencyPause{}, errorf(CodeInvalidRequest, "Only an owner key can pause every agent.")
	}
	if reason != nil {
		r := strings.TrimSpace(*reason)
		if r == "" || utf8.RuneCountInString(r) > MaxPauseReasonLength {
			return EmergencyPause{}, &Error{Code: CodeParameterInvalid, Param: "reason",
				Message: fmt.Sprintf("reason must be 1 to %d characters, or omitted.", MaxPauseReasonLength)}
		}
		reason = &r
	}
	ids, err := s.envAgentIDs(p.OwnerID, p.Env(), false)
	if err != nil {
		return EmergencyPause{}, err
	}
	out := EmergencyPause{Object: "emergency_pause", Livemode: p.Livemode, Reason: reason,
		Paused: []string{}, AlreadyPaused: []string{}}
	// The pauses run in their agents' actors at once: in an emergency the
	// last agent should not wait for the others' journal records.
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, changed, err := s.changeAgent(ctx, p, id, &agentAction{action: ActionPause,
				pause: &AgentPause{Emergency: true, Reason: reason}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if e := AsError(err); e.Code == CodeConflict || e.Code == CodeNotFound {
					return // archived or removed meanwhile: nothing left to pause
				}
				if first == nil {
					first = err
				}
			case changed:
				out.Paused = append(out.Paused, id)
			default:
				out.AlreadyPaused = append(out.AlreadyPaused, id)
			}
		}()
	}
	wg.Wait()
	// Logged even when one pause failed: the others took effect.
	s.logOwnerAction("emergency_pause", p, slog.Int("paused", len(out.Paused)), slog.Int("already_paused", len(out.AlreadyPaused)),
		slog.Bool("complete", first == nil))
	if first != nil {
		return EmergencyPause{}, first
	}
	sort.Strings(out.Paused)
	sort.Strings(out.AlreadyPaused)
	out.PausedCount = len(out.Paused)
	return out, nil
}

// envAgentIDs lists the ids of an environment's agents, archived ones
// only when withArchived.
func (s *System) envAgentIDs(ownerID string, env Env, withArchived bool) ([]string, error) {
	prefix := prefixOf(ownerID, string(env))
	var ids []string
	err := s.store.Scan(bOwnerAgents, prefix, nil, false, func(k, v []byte) bool {
		if withArchived || string(v) != AgentArchived {
			ids = append(ids, string(k[len(prefix):]))
		}
		return true
	})
	if err != nil {
		return nil, ErrUnavailable
	}
	return ids, nil
}

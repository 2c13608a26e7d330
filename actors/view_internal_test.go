package actors

import (
	"testing"
	"time"

	"github.com/agentpay/guard/policy"
)

// A snapshot shares the previous one's rules only while nothing a reader
// sees of them changed: each field that marks a new version, and the pause
// flag, makes it take a fresh copy.
func TestSamePolicyNoticesEveryChange(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	base := policy.Policy{ID: "pol_1", Version: 3, Hash: "sha256:aa", EffectiveAt: at}
	same := base
	if !samePolicy(&base, &same) {
		t.Fatal("an equal copy counts as different")
	}
	for name, change := range map[string]func(p *policy.Policy){
		"id":           func(p *policy.Policy) { p.ID = "pol_2" },
		"version":      func(p *policy.Policy) { p.Version++ },
		"hash":         func(p *policy.Policy) { p.Hash = "sha256:bb" },
		"paused":       func(p *policy.Policy) { p.Paused = true },
		"effective_at": func(p *policy.Policy) { p.EffectiveAt = at.Add(time.Hour) },
	} {
		other := base
		change(&other)
		if samePolicy(&base, &other) {
			t.Errorf("a change of %s goes unnoticed", name)
		}
	}
}

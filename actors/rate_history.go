package actors

import "time"

// SpendAges returns how long ago each spend the agent created within the
// last `within` was created, by the clock of the agent's environment (the
// practice clock in practice). Spend ids begin with their creation time,
// and the agent's index holds them in id order, so this reads only the
// span asked for. A restarted rate limiter starts the agent's daily
// allowance from it. An agent that does not exist has no spends.
func (s *System) SpendAges(agentID string, within time.Duration) ([]time.Duration, error) {
	var ag Agent
	found, err := s.getJSON(bAgents, []byte(agentID), &ag)
	if err != nil || !found {
		return nil, err
	}
	now := s.nowFor(ag.OwnerID, EnvOf(ag.Livemode))
	prefix := prefixOf(agentID)
	from := append(append([]byte{}, prefix...), idTimePrefix("spd", now.Add(-within))...)
	var ages []time.Duration
	var bad error
	err = s.store.Scan(bAgentSpends, prefix, from, false, func(k, _ []byte) bool {
		at, err := idTime(string(k[len(prefix):]))
		if err != nil {
			bad = err
			return false
		}
		ages = append(ages, now.Sub(at))
		return true
	})
	if err == nil {
		err = bad
	}
	return ages, err
}

// KeyChangeAges returns how long ago each key of the owner's environment
// made within the last `within` was made (created or rotated in), each on
// the clock it ages by. The owner keys the owner was created with (made in
// the same instant) are not counted: they were not asked for through the
// API. Key ids begin with their creation time, and the owner's index of
// keys holds them in id order, so this reads only the owner's keys of the
// span asked for. A restarted
// rate limiter starts the owner's daily allowance of key changes from it.
func (s *System) KeyChangeAges(ownerID string, livemode bool, within time.Duration) ([]time.Duration, error) {
	var o Owner
	found, err := s.getJSON(bOwners, []byte(ownerID), &o)
	if err != nil || !found {
		return nil, err
	}
	// Each key is dated on the clock it was made by (keyNow): the service
	// clock for owner keys, the practice clock for practice agent keys.
	// The service clock is never ahead of the practice clock, so the
	// span from it covers both.
	agentNow, ownerNow := s.keyNow(KindAgent, ownerID, livemode), s.keyNow(KindOwner, ownerID, livemode)
	var ages []time.Duration
	since := idTimePrefix("key", ownerNow.Add(-within))
	err = s.ownerKeys(ownerID, EnvOf(livemode), false, since, func(string) bool { return true }, func(k APIKey) bool {
		initial := k.Kind == KindOwner && k.CreatedAt.Equal(o.CreatedAt)
		now := agentNow
		if k.Kind == KindOwner {
			now = ownerNow
		}
		if !initial && now.Sub(k.CreatedAt) < within {
			ages = append(ages, now.Sub(k.CreatedAt))
		}
		return true
	})
	return ages, err
}

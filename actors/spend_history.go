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

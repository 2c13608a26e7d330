package console

import (
	"context"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// chartDays is how many days the balance chart shows.
const chartDays = 14

type agentBalance struct {
	Agent    actors.Agent
	Balance  policy.Balance
	DailyCap policy.Amount
	Chart    chart
}

type balanceData struct {
	Funding actors.Funding
	Agents  []agentBalance
}

func (c *Console) balancePage(r *request) error {
	f, err := c.sys.Funding(r.who)
	if err != nil {
		return fromActors(err, "The balance could not be read")
	}
	_, agents, err := c.agentsOf(r.who)
	if err != nil {
		return fromActors(err, "The balance could not be read")
	}
	d := balanceData{Funding: f}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, ag := range agents {
		if ag.Status == actors.AgentArchived {
			continue
		}
		pol, err := c.sys.Policy(r.who, ag.ID)
		if err != nil {
			return fromActors(err, "The balance could not be read")
		}
		days, err := c.sys.DailySpend(r.who, ag.ID, chartDays)
		if err != nil {
			return fromActors(err, "The balance could not be read")
		}
		// The agent's balance is what the agent itself would read: the
		// owner acts for one of its own agents here.
		p := r.who
		p.AgentID = ag.ID
		bal, err := c.sys.Balance(ctx, p)
		if err != nil {
			return fromActors(err, "The balance could not be read")
		}
		d.Agents = append(d.Agents, agentBalance{Agent: ag, Balance: bal, DailyCap: pol.DailyCap,
			Chart: dailyChart(i, ag.Name, days, pol.DailyCap)})
	}
	return c.ok(r, "balance", "Balance", d)
}

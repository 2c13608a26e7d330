package guardtest

import (
	"context"
	"testing"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/policy"
)

// PracticeOwner creates an owner through the actors directly and returns
// the principal its practice owner key authenticates as: for tests below
// the HTTP layer.
func PracticeOwner(t testing.TB, sys *actors.System, name, email string) actors.Principal {
	t.Helper()
	oc, err := sys.CreateOwner(context.Background(), name, email, "")
	if err != nil {
		t.Fatalf("guardtest: creating owner %q: %v", name, err)
	}
	owner, err := sys.Authenticate(oc.Keys[actors.EnvTest])
	if err != nil {
		t.Fatalf("guardtest: the new owner's practice key: %v", err)
	}
	return owner
}

// AgentPrincipal creates an agent with rules (nil: the defaults) through
// the actors directly, gives it a key and returns the principal that key
// authenticates as: for tests below the HTTP layer.
func AgentPrincipal(t testing.TB, sys *actors.System, owner actors.Principal, name string, rules *policy.RulesInput) actors.Principal {
	t.Helper()
	ctx := context.Background()
	ag, _, err := sys.CreateAgent(ctx, owner, name, rules)
	if err != nil {
		t.Fatalf("guardtest: creating agent %q: %v", name, err)
	}
	key, err := sys.CreateAgentKey(ctx, owner, ag.ID)
	if err != nil {
		t.Fatalf("guardtest: creating a key for %s: %v", ag.ID, err)
	}
	p, err := sys.Authenticate(key.Secret)
	if err != nil {
		t.Fatalf("guardtest: the new key of %s does not authenticate: %v", ag.ID, err)
	}
	return p
}

package console

import (
	"context"
	"strconv"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/transport/ratelimit"
)

type keyRow struct {
	actors.KeyView
	AgentName string
	State     string // active, rotated (in grace), revoked, expired
}

type keysData struct {
	Keys   []keyRow
	Agents []actors.Agent
	Done   string
	Error  string // a refused change, shown above the keys
	// Grace and GraceFor keep a refused rotation's typed grace period in
	// its key's form.
	Grace, GraceFor string
}

func (c *Console) keyList(r *request) error {
	return c.keysPage(r, 200, keysData{Done: doneText(query(r, "done"))})
}

// keysPage renders the key list with d's message.
func (c *Console) keysPage(r *request, status int, d keysData) error {
	keys, err := c.sys.ListKeys(r.who)
	if err != nil {
		return fromActors(err, "Keys could not be listed")
	}
	byID, agents, err := c.agentsOf(r.who)
	if err != nil {
		return fromActors(err, "Keys could not be listed")
	}
	for _, ag := range agents {
		if ag.Status != actors.AgentArchived {
			d.Agents = append(d.Agents, ag)
		}
	}
	for _, k := range keys {
		row := keyRow{KeyView: k, State: k.Status}
		if k.AgentID != nil {
			row.AgentName = byID[*k.AgentID].Name
		}
		if k.Status == actors.KeyRotated {
			row.State = "rotated, works until " + k.GracePeriodEndsAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		d.Keys = append(d.Keys, row)
	}
	c.render(r, status, "keys", "Keys", "", d)
	return nil
}

type secretData struct {
	Key     actors.CreatedKey
	Rotated string // id of the key this one replaces
}

// keyCreate makes an agent key and shows its secret, once.
func (c *Console) keyCreate(r *request) error {
	if err := c.limit(r, ratelimit.KeyChanges, r.who.OwnerID); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := c.sys.CreateAgentKey(ctx, r.who, form(r, "agent_id"))
	if err != nil {
		return fromActors(err, "No key was created")
	}
	return c.ok(r, "secret", "New key", secretData{Key: k})
}

// ownerKeyCreate makes an owner key and shows its secret, once. The
// console is signed in with the owner's password, so it is the way back
// to the API when every owner key has expired or been revoked: no key
// could make another then.
func (c *Console) ownerKeyCreate(r *request) error {
	if err := c.limit(r, ratelimit.KeyChanges, r.who.OwnerID); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k, err := c.sys.CreateOwnerKey(ctx, r.who)
	if err != nil {
		return fromActors(err, "No key was created")
	}
	return c.ok(r, "secret", "New owner key", secretData{Key: k})
}

// keyRotate replaces a key, keeping the old one working for the grace
// period, and shows the new secret once.
func (c *Console) keyRotate(r *request) error {
	typed := form(r, "grace_period_hours")
	hours, err := strconv.Atoi(typed)
	if err != nil || hours < 0 || hours > 168 {
		// Back to the keys, with the value as typed in its key's form.
		return c.keysPage(r, 400, keysData{Error: "No key was rotated: the grace period (how long the old key keeps working) must be a whole number of hours from 0 to 168, not \"" +
			typed + "\".", Grace: typed, GraceFor: param(r, "id")})
	}
	if err := c.limit(r, ratelimit.KeyChanges, r.who.OwnerID); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := param(r, "id")
	k, err := c.sys.RotateKey(ctx, r.who, id, hours)
	if err != nil {
		return fromActors(err, "No key was rotated")
	}
	return c.ok(r, "secret", "Rotated key", secretData{Key: k, Rotated: id})
}

func (c *Console) keyRevokeConfirm(r *request) error {
	id := param(r, "id")
	keys, err := c.sys.ListKeys(r.who)
	if err != nil {
		return fromActors(err, "Keys could not be listed")
	}
	for _, k := range keys {
		if k.ID == id {
			return c.ok(r, "revoke", "Revoke key", k)
		}
	}
	return &pageError{status: 404, title: "Key not found", message: "There is no such key in this environment."}
}

func (c *Console) keyRevoke(r *request) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.sys.RevokeKey(ctx, r.who, param(r, "id")); err != nil {
		return fromActors(err, "The key was not revoked")
	}
	return redirect(c.base + "/keys?done=revoke")
}

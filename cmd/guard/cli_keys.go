package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"time"
)

// maxGraceHours is the longest overlap a rotation allows.
const maxGraceHours = 168

var keysGroup = cmdGroup{
	name:    "keys",
	summary: "Create, list, revoke and rotate API keys. A secret is shown once, when it is made.",
	footer:  commonUsage,
	cmds: []subcommand{
		{"list", "", "list the owner's keys of the environment (never secrets)", keysList},
		{"create", "AGENT_ID", "create a key for an agent and print its secret once", keysCreate},
		{"revoke", "KEY_ID", "revoke a key now", keysRevoke},
		{"rotate", "KEY_ID [-grace-hours N]", "replace a key; the old one works N more hours", keysRotate},
	},
}

// keyView is an api_key object; Secret is set only when one was just made.
type keyView struct {
	ID        string     `json:"id"`
	Kind      string     `json:"kind"`
	AgentID   *string    `json:"agent_id"`
	Livemode  bool       `json:"livemode"`
	Prefix    string     `json:"prefix"`
	Last4     string     `json:"last4"`
	ExpiresAt *time.Time `json:"expires_at"`
	CreatedAt *time.Time `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	// GraceEndsAt is when a rotated key stops working.
	GraceEndsAt *time.Time `json:"grace_period_ends_at"`
	// Status is the server's word: active, rotated, expired or revoked,
	// by the clock that ages the key (a practice clock moved ahead
	// included), which this machine's clock does not know.
	Status string `json:"status"`
	Secret string `json:"secret"`
	// RotatedKey is, in a rotation's answer, the key it replaced.
	RotatedKey *keyView `json:"rotated_key"`
}

func (k keyView) status() string {
	if k.Status == "rotated" && k.GraceEndsAt != nil {
		return "rotated, works until " + when(k.GraceEndsAt)
	}
	return k.Status
}

func (k keyView) agent() string {
	if k.AgentID == nil || *k.AgentID == "" {
		return "-"
	}
	return *k.AgentID
}

func keysList(c *cli, args []string) error {
	all, done, err := c.listCommand(args, "/v1/keys", "key")
	if done || err != nil {
		return err
	}
	rows := make([][]string, 0, len(all))
	for _, item := range all {
		var k keyView
		if err := json.Unmarshal(item, &k); err != nil {
			return fmt.Errorf("the server's key list is not the JSON expected: %w", err)
		}
		rows = append(rows, []string{k.ID, k.Kind, k.agent(), "..." + k.Last4, k.status(), when(k.CreatedAt)})
	}
	return c.table([]string{"ID", "KIND", "AGENT", "LAST4", "STATUS", "CREATED"}, rows)
}

func keysCreate(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, "AGENT_ID")
	if err != nil {
		return err
	}
	var k keyView
	raw, err := c.postJSON("/v1/agents/"+pathID(pos[0])+"/keys", nil, &k)
	if err != nil {
		return err
	}
	return c.printNewKey("created", raw, k)
}

// printNewKey prints a key that carries its secret, with the warning that
// it is the only time the secret is shown. The warning goes to standard
// error so that standard output can be redirected to a safe place.
func (c *cli) printNewKey(verb string, raw []byte, k keyView) error {
	if c.jsonOut {
		if err := c.printJSON(raw); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.stdout, "%s key %s (%s, agent %s, expires %s)\n", verb, k.ID, k.Prefix, k.agent(), when(k.ExpiresAt))
		if _, err := fmt.Fprintf(c.stdout, "secret: %s\n", k.Secret); err != nil {
			return err
		}
		if old := k.RotatedKey; old != nil {
			fmt.Fprintf(c.stdout, "old key %s works until %s\n", old.ID, when(old.GraceEndsAt))
		}
	}
	if k.Secret != "" {
		fmt.Fprintln(c.stderr, "warning: store this secret now; it is not shown again and cannot be recovered.")
	}
	return nil
}

func keysRevoke(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, "KEY_ID")
	if err != nil {
		return err
	}
	var k keyView
	raw, err := c.postJSON("/v1/keys/"+pathID(pos[0])+"/revoke", nil, &k)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	_, err = fmt.Fprintf(c.stdout, "revoked key %s (%s ...%s, agent %s) at %s\n", k.ID, k.Prefix, k.Last4, k.agent(), when(k.RevokedAt))
	return err
}

func keysRotate(c *cli, args []string) error {
	fs := c.flags()
	grace := fs.Int("grace-hours", 0, fmt.Sprintf("hours the old key keeps working, 0 to %d (default: the server's)", maxGraceHours))
	pos, err := c.parse(fs, args, "KEY_ID")
	if err != nil {
		return err
	}
	body := map[string]int{}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "grace-hours" })
	if set {
		if *grace < 0 || *grace > maxGraceHours {
			return fmt.Errorf("keys rotate: -grace-hours must be from 0 to %d", maxGraceHours)
		}
		body["grace_period_hours"] = *grace
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var k keyView
	raw, err := c.postJSON("/v1/keys/"+pathID(pos[0])+"/rotate", b, &k)
	if err != nil {
		return err
	}
	return c.printNewKey("new", raw, k)
}

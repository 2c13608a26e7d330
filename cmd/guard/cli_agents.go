package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// listPageSize is the largest page GET /v1/agents gives.
const listPageSize = 50

// maxListPages stops a list that never ends (a server bug) from looping.
const maxListPages = 10000

var agentsGroup = cmdGroup{
	name:    "agents",
	summary: "Create, list and change the agents of the owner key's environment.",
	footer:  commonUsage,
	cmds: []subcommand{
		{"list", "[-limit N]", "list every agent, newest first (N per request, 1 to 50)", agentsList},
		{"create", "-name NAME [-policy FILE.json]", "create an agent, with a policy body (default rules otherwise)", agentsCreate},
		{"rename", "AGENT_ID NAME", "give an agent a new name", agentsRename},
		{"pause", "AGENT_ID | -all [-reason TEXT]", "pause an agent, or every agent at once (emergency): spends are declined until resumed", agentsPause},
		{"resume", "AGENT_ID", "resume a paused agent", agentAction("resume")},
		{"archive", "AGENT_ID", "archive an agent for good (revokes its keys)", agentAction("archive")},
	},
}

// agentView is the part of an agent the summaries show.
type agentView struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Status        string     `json:"status"`
	Livemode      bool       `json:"livemode"`
	PolicyVersion int        `json:"policy_version"`
	CreatedAt     *time.Time `json:"created_at"`
	PausedAt      *time.Time `json:"paused_at"`
	ArchivedAt    *time.Time `json:"archived_at"`
}

func (a agentView) summary() string {
	mode := "practice"
	if a.Livemode {
		mode = "live"
	}
	s := fmt.Sprintf("agent %s %q: %s (%s, policy version %d, created %s", a.ID, a.Name, a.Status, mode,
		a.PolicyVersion, when(a.CreatedAt))
	switch {
	case a.ArchivedAt != nil:
		s += ", archived " + when(a.ArchivedAt)
	case a.PausedAt != nil:
		s += ", paused " + when(a.PausedAt)
	}
	return s + ")"
}

// listPage is one page of a list answer.
type listPage struct {
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

func agentsList(c *cli, args []string) error {
	all, done, err := c.listCommand(args, "/v1/agents", "agent")
	if done || err != nil {
		return err
	}
	rows := make([][]string, 0, len(all))
	for _, item := range all {
		var a agentView
		if err := json.Unmarshal(item, &a); err != nil {
			return fmt.Errorf("the server's agent list is not the JSON expected: %w", err)
		}
		rows = append(rows, []string{a.ID, a.Name, a.Status, when(a.CreatedAt)})
	}
	return c.table([]string{"ID", "NAME", "STATUS", "CREATED"}, rows)
}

// listCommand parses the flags of a list command (-limit) and fetches
// every page of the list. It is done when it printed the answer itself:
// the list for -json, or that there is nothing; otherwise the caller
// prints the items as a table.
func (c *cli) listCommand(args []string, path, what string) (all []json.RawMessage, done bool, err error) {
	fs := c.flags()
	limit := fs.Int("limit", listPageSize, what+"s per request, `N` from 1 to 50 (every page is followed)")
	if _, err := c.parse(fs, args); err != nil {
		return nil, true, err
	}
	if *limit < 1 || *limit > listPageSize {
		return nil, true, fmt.Errorf("%ss list: -limit must be from 1 to %d, not %d", what, listPageSize, *limit)
	}
	first, all, err := c.listAll(path, what, *limit, nil)
	switch {
	case err != nil:
		return nil, true, err
	case c.jsonOut:
		return nil, true, c.printList(first, all)
	case len(all) == 0:
		_, err := fmt.Fprintf(c.stdout, "no %ss\n", what)
		return nil, true, err
	}
	return all, false, nil
}

// listAll follows a list's pages, limit items at a time, with the list's
// filters, and returns the first answer as sent and every item of every
// page.
func (c *cli) listAll(path, what string, limit int, filters url.Values) (first []byte, all []json.RawMessage, err error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	for k, v := range filters {
		q[k] = v
	}
	for range maxListPages {
		var page listPage
		raw, err := c.getJSON(path, q, &page)
		if err != nil {
			return nil, nil, err
		}
		if first == nil {
			first = raw
		}
		all = append(all, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			return first, all, nil
		}
		var last struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(page.Data[len(page.Data)-1], &last); err != nil || last.ID == "" {
			return nil, nil, fmt.Errorf("the server's %s list has an item without an id", what)
		}
		if last.ID == q.Get("starting_after") {
			return nil, nil, fmt.Errorf("the server's %s list does not advance past %s", what, last.ID)
		}
		q.Set("starting_after", last.ID)
	}
	return nil, nil, fmt.Errorf("the server's %s list goes on past %d pages", what, maxListPages)
}

// printList prints a list answer for -json. One page is printed as the
// server sent it; several pages become one list object holding every
// item, with has_more false.
func (c *cli) printList(first []byte, all []json.RawMessage) error {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(first, &head); err != nil {
		return fmt.Errorf("the server's answer is not a JSON object: %w", err)
	}
	var n []json.RawMessage
	_ = json.Unmarshal(head["data"], &n)
	if len(n) == len(all) {
		return c.printJSON(first)
	}
	if all == nil {
		all = []json.RawMessage{}
	}
	data, err := json.Marshal(all)
	if err != nil {
		return err
	}
	head["data"] = data
	head["has_more"] = json.RawMessage("false")
	out, err := json.Marshal(head)
	if err != nil {
		return err
	}
	return c.printJSON(out)
}

func agentsCreate(c *cli, args []string) error {
	fs := c.flags()
	name := fs.String("name", "", "agent `NAME`, 1 to 100 characters (required)")
	policyFile := fs.String("policy", "", "`FILE.json` holding the policy body (\"-\" reads standard input)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if strings.TrimSpace(*name) == "" {
		return c.usageErr(fs, "-name is required")
	}
	body := struct {
		Name   string          `json:"name"`
		Policy json.RawMessage `json:"policy,omitempty"`
	}{Name: *name}
	if *policyFile != "" {
		pol, err := c.readJSONObject("policy", *policyFile)
		if err != nil {
			return err
		}
		body.Policy = pol
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var a agentView
	raw, err := c.postJSON("/v1/agents", b, &a)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	_, err = fmt.Fprintln(c.stdout, "created "+a.summary())
	return err
}

// agentAction runs POST /v1/agents/{id}/pause, /resume or /archive.
func agentAction(action string) func(c *cli, args []string) error {
	return func(c *cli, args []string) error {
		fs := c.flags()
		pos, err := c.parse(fs, args, "AGENT_ID")
		if err != nil {
			return err
		}
		return c.changeAgent(pos[0], action)
	}
}

func (c *cli) changeAgent(id, action string) error {
	var a agentView
	raw, err := c.postJSON("/v1/agents/"+pathID(id)+"/"+action, nil, &a)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	_, err = fmt.Fprintln(c.stdout, a.summary())
	return err
}

func agentsRename(c *cli, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args, "AGENT_ID", "NAME")
	if err != nil {
		return err
	}
	b, err := json.Marshal(map[string]string{"name": pos[1]})
	if err != nil {
		return err
	}
	var a agentView
	raw, err := c.postJSON("/v1/agents/"+pathID(pos[0]), b, &a)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	_, err = fmt.Fprintln(c.stdout, "renamed "+a.summary())
	return err
}

// agentsPause pauses one agent, or with -all every agent of the key's
// environment (POST /v1/agents/pause_all).
func agentsPause(c *cli, args []string) error {
	fs := c.flags()
	all := fs.Bool("all", false, "pause every agent of the environment at once (an emergency pause)")
	reason := fs.String("reason", "", "with -all: why, `TEXT` shown on each paused agent")
	pos, err := c.parseArgs(fs, args)
	if err != nil {
		return err
	}
	if !*all {
		if *reason != "" {
			return c.usageErr(fs, "-reason goes with -all")
		}
		if err := c.want(fs, pos, "AGENT_ID"); err != nil {
			return err
		}
		return c.changeAgent(pos[0], "pause")
	}
	if err := c.want(fs, pos); err != nil {
		return err
	}
	var body []byte
	if *reason != "" {
		if body, err = json.Marshal(map[string]string{"reason": *reason}); err != nil {
			return err
		}
	}
	var out struct {
		Paused        []string `json:"paused"`
		AlreadyPaused []string `json:"already_paused"`
	}
	raw, err := c.postJSON("/v1/agents/pause_all", body, &out)
	if err != nil {
		return err
	}
	if c.jsonOut {
		return c.printJSON(raw)
	}
	if _, err := fmt.Fprintf(c.stdout, "paused %d agents; %d were paused already\n", len(out.Paused), len(out.AlreadyPaused)); err != nil {
		return err
	}
	for _, id := range out.Paused {
		if _, err := fmt.Fprintln(c.stdout, "paused "+id); err != nil {
			return err
		}
	}
	return nil
}

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/transport/receipt"
)

// receiptKeysGroup manages the service's receipt signing keys on a
// stopped server's data, as the owner commands do.
var receiptKeysGroup = cmdGroup{
	name: "receipt-keys",
	summary: "List and rotate the keys that sign receipts (published at /.well-known/jwks.json). The\n" +
		"server must be stopped: the command opens the data itself, with the settings serve would\n" +
		"read (config file, GUARD_* variables); a change takes effect when the server starts again.",
	footer: `"guard receipt-keys rotate -h" and so on list their flags.`,
	cmds: []subcommand{
		{"list", receiptKeysSynopsis, "list the keys, the current one first",
			func(c *cli, args []string) error { return receiptKeysList(args, c.stdout, c.stderr, c.getenv) }},
		{"rotate", receiptKeysSynopsis, "retire the current key and make a new one current",
			func(c *cli, args []string) error { return receiptKeysRotate(args, c.stdout, c.stderr, c.getenv) }},
		{"withdraw", receiptKeysWithdrawSynopsis, "take a retired, exposed key out of the JWKS",
			func(c *cli, args []string) error { return receiptKeysWithdraw(args, c.stdout, c.stderr, c.getenv) }},
	},
}

const (
	receiptKeysSynopsis         = "[-config FILE] [-data DIR] [-journal-dir DIR] [-json]"
	receiptKeysWithdrawSynopsis = "[-config FILE] [-data DIR] [-journal-dir DIR] -yes KEY_ID"
)

// receiptKeyView is a key as the commands print it: never its private part.
type receiptKeyView struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"` // current or retired
	CreatedAt time.Time  `json:"created_at"`
	RetiredAt *time.Time `json:"retired_at"`
}

func viewOf(k receipt.Key) receiptKeyView {
	v := receiptKeyView{ID: k.ID, Status: "current", CreatedAt: k.CreatedAt, RetiredAt: k.RetiredAt}
	if k.Retired() {
		v.Status = "retired"
	}
	return v
}

func receiptKeysList(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	oc := newDataCommand("receipt-keys", "list", receiptKeysSynopsis,
		"List the receipt signing keys: the current one, which signs new receipts, then the retired\n"+
			"ones, newest first, which the JWKS still publishes so that the receipts they signed verify.\n"+
			"The server must be stopped.", stdout, stderr, getenv)
	asJSON := oc.fs.Bool("json", false, "print JSON")
	cfg, err := parseDataCommand(oc, args, getenv)
	if err != nil {
		return err
	}
	keys, err := wire.ReceiptKeys(cfg)
	if err != nil {
		return err
	}
	views := make([]receiptKeyView, 0, len(keys))
	for _, k := range keys {
		views = append(views, viewOf(k))
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"data": views})
	}
	if len(views) == 0 {
		fmt.Fprintln(stdout, "No receipt key yet: the server makes the first one when it starts.")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tCREATED\tRETIRED")
	for _, v := range views {
		retired := "-"
		if v.RetiredAt != nil {
			retired = v.RetiredAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.ID, v.Status, v.CreatedAt.Format(time.RFC3339), retired)
	}
	return tw.Flush()
}

func receiptKeysRotate(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	oc := newDataCommand("receipt-keys", "rotate", receiptKeysSynopsis,
		"Retire the current receipt signing key and make a new one current. Receipts signed before\n"+
			"keep verifying: the JWKS goes on publishing the retired key. Each owner's chain of receipts\n"+
			"goes on across the change. The server must be stopped; the new key signs from its next start.",
		stdout, stderr, getenv)
	asJSON := oc.fs.Bool("json", false, "print JSON")
	cfg, err := parseDataCommand(oc, args, getenv)
	if err != nil {
		return err
	}
	current, retired, err := wire.RotateReceiptKey(cfg, time.Now())
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(map[string]any{"current": viewOf(current), "retired": viewOf(retired)})
	}
	fmt.Fprintf(stdout, "Receipt key %s is current; %s is retired and stays in the JWKS, so the receipts it signed keep verifying.\n"+
		"Start the server for the new key to sign. If %s was exposed, withdraw it once no one needs its receipts verified:\n"+
		"  guard receipt-keys withdraw -yes %s\n", current.ID, retired.ID, retired.ID, retired.ID)
	return nil
}

func receiptKeysWithdraw(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	oc := newDataCommand("receipt-keys", "withdraw", receiptKeysWithdrawSynopsis,
		"Take a retired receipt key out of the JWKS, for a key that was exposed: a receipt forged with\n"+
			"it stops verifying, and so does every genuine receipt it signed. The current key cannot be\n"+
			"withdrawn (rotate first). The server must be stopped; the JWKS changes at its next start.",
		stdout, stderr, getenv)
	yes := oc.fs.Bool("yes", false, "confirm: the receipts the key signed will no longer verify")
	if err := oc.parse(args); err != nil {
		return err
	}
	if oc.fs.NArg() != 1 {
		return oc.usageErr("give one key id (rk_...); guard receipt-keys list shows them")
	}
	kid := oc.fs.Arg(0)
	if !*yes {
		return oc.usageErr("withdrawing %s makes every receipt it signed fail verification; add -yes to confirm", kid)
	}
	cfg, err := oc.config(getenv)
	if err != nil {
		return err
	}
	if err := wire.WithdrawReceiptKey(cfg, kid); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Receipt key %s is withdrawn: from the server's next start the JWKS no longer lists it.\n", kid)
	return nil
}

// parseDataCommand reads the flags of a command that takes no argument
// and returns the server's settings.
func parseDataCommand(oc *ownerCommand, args []string, getenv func(string) string) (wire.Config, error) {
	if err := oc.parse(args); err != nil {
		return wire.Config{}, err
	}
	if oc.fs.NArg() > 0 {
		return wire.Config{}, oc.usageErr("unexpected argument %q", oc.fs.Arg(0))
	}
	return oc.config(getenv)
}

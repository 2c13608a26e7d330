package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/cmd/wire"
	"github.com/agentpay/guard/internal/logbatch"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport"
	"github.com/agentpay/guard/transport/console"
)

// The access log's lines are written at most accessLogFlush after the
// first of them, or when they fill accessLogBuffer: a SIGKILL loses at
// most that much of the access log, and nothing else.
const (
	accessLogFlush  = 100 * time.Millisecond
	accessLogBuffer = 64 << 10
)

func serve(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	cfg, err := wire.LoadConfig(args, getenv)
	if help := (wire.Help{}); errors.As(err, &help) {
		fmt.Fprint(stdout, help.Usage)
		return flag.ErrHelp
	}
	if cle := (wire.CommandLineError{}); errors.As(err, &cle) {
		fmt.Fprint(stderr, cle.Usage)
		return usageError{err}
	}
	if err != nil {
		return err
	}
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	// The access log, a line per request, is written in batches: a write
	// per request costs a busy server a tenth of its throughput. Every
	// other line is written at once, after the access lines before it.
	lines := logbatch.New(stderr, accessLogFlush, accessLogBuffer)
	defer lines.Close()
	opts := &slog.HandlerOptions{Level: level}
	log := slog.New(slog.NewTextHandler(lines.Urgent(), opts))
	accessLog := slog.New(slog.NewTextHandler(lines, opts))
	warnUnknownVariables(log, getenv)
	// Absolute, so that the log and the --dev notes name the directories
	// whatever directory the reader is in.
	if cfg.Data, err = filepath.Abs(cfg.Data); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if cfg.JournalDir != "" {
		if cfg.JournalDir, err = filepath.Abs(cfg.JournalDir); err != nil {
			return fmt.Errorf("journal directory: %w", err)
		}
	}
	// The port first: with port 0 the service must know the one it got
	// before it builds approval links, and a port in use is found before
	// the journal is replayed.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("listening on %s: another process uses the port (a server already running?); stop it, or choose another address with -addr or GUARD_ADDR (make run GUARD_ADDR=127.0.0.1:8081): %w", cfg.Addr, err)
		}
		return fmt.Errorf("listening on %s: %w", cfg.Addr, err)
	}
	cfg = cfg.Bound(ln.Addr().String())
	var opLn net.Listener
	if cfg.MetricsAddr != "" {
		if opLn, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			ln.Close()
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("listening on %s (metrics_addr): another process uses the port; choose another with -metrics-addr or GUARD_METRICS_ADDR: %w", cfg.MetricsAddr, err)
			}
			return fmt.Errorf("listening on %s (metrics_addr): %w", cfg.MetricsAddr, err)
		}
	}
	closeListeners := func() {
		ln.Close()
		if opLn != nil {
			opLn.Close()
		}
	}
	svc, err := wire.Open(cfg, wire.Options{Logger: log, AccessLogger: accessLog})
	if err != nil {
		closeListeners()
		return err
	}
	if cfg.Dev {
		if err := devBootstrap(ctx, svc, cfg, ln.Addr().String(), stdout); err != nil {
			closeListeners()
			shutdown(svc, cfg.ShutdownTimeout)
			return err
		}
	}
	// The signing key's id, so that an operator who rotated it sees the
	// new one in use.
	attrs := []any{"addr", ln.Addr().String(), "data", cfg.Data, "version", buildVersion(), "api_version", transport.APIVersion,
		"receipt_key", svc.ReceiptKeyID()}
	if cfg.JournalDir != "" {
		attrs = append(attrs, "journal_dir", cfg.JournalDir)
	}
	if opLn != nil {
		attrs = append(attrs, "metrics", "http://"+opLn.Addr().String()+"/metrics")
	}
	log.Info("serving", attrs...)
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ln) }()
	operatorFailed := make(chan error, 1)
	if opLn != nil {
		go func() {
			if err := svc.ServeOperator(opLn); err != nil {
				operatorFailed <- fmt.Errorf("operator listener: %w", err)
			}
		}()
	}
	select {
	case err = <-served:
	case err = <-operatorFailed:
	case <-ctx.Done():
		log.Info("stopping: finishing in-flight requests and flushing the journal (a second signal stops at once)",
			"shutdown_timeout", cfg.ShutdownTimeout)
	}
	if serr := shutdown(svc, cfg.ShutdownTimeout); err == nil {
		err = serr
	}
	if err == nil {
		err = <-served
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// shutdown stops the service within d. Its error is returned, not logged:
// the caller reports it once.
// warnUnknownVariables logs the GUARD_ variables no setting reads: a
// mistyped GUARD_DATA would otherwise serve an empty data directory
// without a word.
func warnUnknownVariables(log *slog.Logger, getenv func(string) string) {
	var set []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); getenv(name) != "" {
			set = append(set, name)
		}
	}
	unknown, closest := wire.UnknownVariables(set)
	for i, name := range unknown {
		attrs := []any{"variable", name}
		if closest[i] != "" {
			attrs = append(attrs, "did_you_mean", closest[i])
		}
		log.Warn("an environment variable no setting reads is ignored", attrs...)
	}
}

func shutdown(svc *wire.Service, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	err := svc.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the graceful stop did not finish within shutdown_timeout (%s): requests still open were cut off (what they recorded is in the journal; raise shutdown_timeout to wait longer): %w", d, err)
	}
	return err
}

// devCredentials are what --dev created, kept in the data directory so a
// restart can print them again.
type devCredentials struct {
	OwnerID  string `json:"owner_id"`
	OwnerKey string `json:"owner_key"`
	AgentID  string `json:"agent_id"`
	AgentKey string `json:"agent_key"`
	// ConsoleEmail and ConsolePassword sign in to the owner console.
	ConsoleEmail    string `json:"console_email"`
	ConsolePassword string `json:"console_password"`
}

// devEmail is the practice owner's console sign-in, and devAgentName the
// name of its practice agent.
const (
	devEmail     = "dev@owner.invalid"
	devAgentName = "practice-agent"
)

// newDevPassword is a random console password for the practice owner.
func newDevPassword() string {
	b := make([]byte, 15)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func devBootstrap(ctx context.Context, svc *wire.Service, cfg wire.Config, addr string, out io.Writer) error {
	path := filepath.Join(cfg.Data, "dev-credentials.json")
	var creds devCredentials
	b, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(b, &creds); err != nil {
			return fmt.Errorf("reading %s: %w (fix or delete the file: a start without it makes new credentials)", path, err)
		}
		if _, oerr := svc.System().OwnerByEmail(devEmail); oerr != nil {
			// The data went, the file stayed: start afresh.
			fmt.Fprintf(out, "%s names a practice owner this data directory does not have; making a new one.\n", path)
			err = os.ErrNotExist
		}
	}
	recovered := false // the file went, the owner stayed
	if errors.Is(err, os.ErrNotExist) {
		if o, oerr := svc.System().OwnerByEmail(devEmail); oerr == nil {
			// Its password and keys are not kept in readable form, so it
			// gets new ones; its practice agent stays the same.
			creds = devCredentials{OwnerID: o.ID, ConsoleEmail: devEmail, ConsolePassword: newDevPassword()}
			if creds.AgentID, err = existingDevAgent(svc.System(), devOwner(o.ID)); err != nil {
				return err
			}
			if err := svc.System().SetOwnerPassword(ctx, o.ID, console.HashPassword(creds.ConsolePassword), "dev_bootstrap"); err != nil {
				return fmt.Errorf("giving the practice owner a new console password: %w", err)
			}
			fmt.Fprintf(out, "%s was missing; the practice owner %s exists and gets a new console password and new keys (the keys made before keep working until revoked).\n", path, devEmail)
			recovered = true
		}
	}
	if err == nil {
		renewed, err := renewDevCredentials(ctx, svc.System(), &creds)
		if err != nil {
			return err
		}
		if renewed != "" || recovered {
			if err := writeDevCredentials(path, creds); err != nil {
				return err
			}
		}
		if renewed != "" && !recovered {
			fmt.Fprintln(out, renewed)
		}
	} else if errors.Is(err, os.ErrNotExist) {
		sys := svc.System()
		pw := newDevPassword()
		oc, err := sys.CreateOwner(ctx, "Practice owner", devEmail, console.HashPassword(pw))
		if err != nil {
			return fmt.Errorf("creating the practice owner: %w", err)
		}
		agentID, agentKey, err := devAgent(ctx, sys, devOwner(oc.Owner.ID))
		if err != nil {
			return err
		}
		creds = devCredentials{OwnerID: oc.Owner.ID, OwnerKey: oc.Keys[actors.EnvTest], AgentID: agentID, AgentKey: agentKey,
			ConsoleEmail: devEmail, ConsolePassword: pw}
		if err := writeDevCredentials(path, creds); err != nil {
			return err
		}
	} else {
		return err
	}
	if creds.ConsolePassword == "" {
		// Credentials from before the console: give the owner a password.
		creds.ConsoleEmail, creds.ConsolePassword = devEmail, newDevPassword()
		if err := svc.System().SetOwnerPassword(ctx, creds.OwnerID, console.HashPassword(creds.ConsolePassword), "dev_bootstrap"); err != nil {
			return fmt.Errorf("setting the practice owner's console password: %w", err)
		}
		if err := writeDevCredentials(path, creds); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, `Practice environment ready (credentials in %s):
  owner key: %s
  agent key: %s
  console:   %s  (sign in as %s, password %s)

Pay a vendor as the agent:
  curl -s -X POST http://%s/v1/spends \
    -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: first-spend' \
    -d '{"amount":"0.50","destination":"api.vendor.com","resource":{"url":"https://api.vendor.com/report"}}'
`, path, creds.OwnerKey, creds.AgentKey, cfg.ConsoleURL, creds.ConsoleEmail, creds.ConsolePassword, addr, creds.AgentKey)
	return nil
}

// devAgent makes the practice agent and its key. Its rules leave room
// enough for the practice magic amounts (98.00, 99.00) to pay without
// waiting for an approval.
func devAgent(ctx context.Context, sys *actors.System, owner actors.Principal) (agentID, key string, err error) {
	trusted := []string{"api.vendor.com"}
	perSpend, daily, monthly, approvalOver := "100.00", "500.00", "5000.00", "100.00"
	ag, _, err := sys.CreateAgent(ctx, owner, devAgentName, &policy.RulesInput{TrustedDestinations: &trusted,
		PerSpendLimit: &perSpend, DailyCap: &daily, MonthlyCap: &monthly, ApprovalOver: &approvalOver})
	if err != nil {
		return "", "", fmt.Errorf("creating the practice agent: %w", err)
	}
	k, err := sys.CreateAgentKey(ctx, owner, ag.ID)
	if err != nil {
		return "", "", fmt.Errorf("creating the practice agent key: %w", err)
	}
	return ag.ID, k.Secret, nil
}

// devOwner is the practice owner acting through the --dev setup: the
// owner action log says by=dev_bootstrap.
func devOwner(ownerID string) actors.Principal {
	p := actors.OwnerPrincipal(ownerID, actors.EnvTest)
	p.By = "dev_bootstrap"
	return p
}

// existingDevAgent is the practice owner's newest active practice agent
// made by --dev, or "" when there is none.
func existingDevAgent(sys *actors.System, owner actors.Principal) (string, error) {
	page, err := sys.ListAgents(owner, actors.ListParams{Limit: 50}) // at most 5 active and 20 archived
	if err != nil {
		return "", fmt.Errorf("reading the practice agents: %w", err)
	}
	for _, raw := range page.Items { // newest first
		var ag actors.Agent
		if json.Unmarshal(raw, &ag) == nil && ag.Name == devAgentName && ag.Status == actors.AgentActive {
			return ag.ID, nil
		}
	}
	return "", nil
}

// renewDevCredentials replaces the saved keys that no longer work, so
// that what a restart prints can be used: the keys may have been rotated,
// revoked or expired, and a practice reset removes the agent. It says
// what it replaced, or nothing when every key works.
func renewDevCredentials(ctx context.Context, sys *actors.System, creds *devCredentials) (string, error) {
	owner := devOwner(creds.OwnerID)
	var renewed []string
	if _, err := sys.Authenticate(creds.OwnerKey); err != nil {
		k, err := sys.CreateOwnerKey(ctx, owner)
		if quotaExceeded(err) {
			// Secrets are not kept readable: keys the file no longer
			// names cannot be printed again, and only take the places
			// of the owner's quota. The oldest gives way.
			if err = revokeOldestKey(ctx, sys, owner, ""); err == nil {
				k, err = sys.CreateOwnerKey(ctx, owner)
			}
		}
		if err != nil {
			return "", fmt.Errorf("the saved owner key no longer works, and a new one could not be made: %w", err)
		}
		creds.OwnerKey = k.Secret
		renewed = append(renewed, "owner key")
	}
	if _, err := sys.Authenticate(creds.AgentKey); err != nil {
		ag, err := sys.Agent(owner, creds.AgentID)
		if err == nil && ag.Status != actors.AgentArchived {
			var k actors.CreatedKey
			k, err = sys.CreateAgentKey(ctx, owner, ag.ID)
			if quotaExceeded(err) { // as for the owner key above
				if err = revokeOldestKey(ctx, sys, owner, ag.ID); err == nil {
					k, err = sys.CreateAgentKey(ctx, owner, ag.ID)
				}
			}
			if err == nil {
				creds.AgentKey = k.Secret
				renewed = append(renewed, "agent key")
			}
		} else {
			// Gone (a practice reset) or archived: a new practice agent.
			if creds.AgentID, creds.AgentKey, err = devAgent(ctx, sys, owner); err == nil {
				renewed = append(renewed, "agent and its key")
			}
		}
		if err != nil {
			return "", fmt.Errorf("the saved agent key no longer works, and a new one could not be made: %w", err)
		}
	}
	if renewed == nil {
		return "", nil
	}
	return "The saved " + strings.Join(renewed, " and ") + " no longer worked (rotated, revoked, expired or reset away); made new ones.", nil
}

// quotaExceeded reports whether err is the answer to one key too many.
func quotaExceeded(err error) bool {
	var e *actors.Error
	return errors.As(err, &e) && e.Code == actors.CodeQuotaExceeded
}

// revokeOldestKey revokes the oldest working practice key of the owner
// (agentID "") or of one of its agents.
func revokeOldestKey(ctx context.Context, sys *actors.System, owner actors.Principal, agentID string) error {
	keys, err := sys.ListKeys(owner)
	if err != nil {
		return err
	}
	kind := actors.KindOwner
	if agentID != "" {
		kind = actors.KindAgent
	}
	now := sys.KeyNow(owner, kind)
	var oldest *actors.KeyView
	for i, k := range keys {
		if k.Kind == kind && (agentID == "" || (k.AgentID != nil && *k.AgentID == agentID)) &&
			k.RevokedAt == nil && now.Before(k.ExpiresAt) && (oldest == nil || k.CreatedAt.Before(oldest.CreatedAt)) {
			oldest = &keys[i]
		}
	}
	if oldest == nil {
		return errors.New("no practice key to replace")
	}
	_, err = sys.RevokeKey(ctx, owner, oldest.ID)
	return err
}

func writeDevCredentials(path string, creds devCredentials) error {
	b, _ := json.MarshalIndent(creds, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

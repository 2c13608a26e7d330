package wire

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/agentpay/guard/actors"
	"github.com/agentpay/guard/internal/metrics"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
	"github.com/agentpay/guard/transport"
	"github.com/agentpay/guard/transport/approvallink"
	"github.com/agentpay/guard/transport/console"
	"github.com/agentpay/guard/transport/notify"
	"github.com/agentpay/guard/transport/rail"
	"github.com/agentpay/guard/transport/ratelimit"
	"github.com/agentpay/guard/transport/receipt"
	"github.com/agentpay/guard/transport/webhook"
)

// JournalFile is the name of the store's bbolt file inside the data
// directory; its journal segments live in JournalFile+".journal" beside it
// unless Config.JournalDir puts them elsewhere.
const JournalFile = "guard.db"

// Service is a running payment guard.
type Service struct {
	cfg   Config
	log   *slog.Logger
	store *persistence.Store
	sys   *actors.System
	api   *transport.Server
	keys  *receipt.Keyring
	links *approvallink.Signer
	hooks *webhook.Sender
	// metrics counts for the operator listener; nil without metrics_addr.
	metrics  *metrics.Metrics
	opMu     sync.Mutex
	operator *http.Server
	stopping bool // Shutdown began: ServeOperator serves nothing more
	closed   sync.Once
}

// Options are what the command line and tests can inject.
type Options struct {
	Logger *slog.Logger
	// AccessLogger, when set, takes the access log's lines (see
	// transport.Config.AccessLogger); by default they go to Logger.
	AccessLogger *slog.Logger
	Clock        actors.Clock
	// CommitFault injects journal commit failures (fault drills, tests).
	CommitFault func(records int) error
}

// defaultProcs is the runtime's own GOMAXPROCS, read once before any Open
// adds spare processors to it: each Open sets default + spare_procs, never
// spare_procs on top of an earlier Open's setting.
var defaultProcs = sync.OnceValue(func() int { return runtime.GOMAXPROCS(0) })

// Open opens the journal (replaying it), loads or creates the receipt
// signing key, and starts the actors. Serve starts the API.
func Open(cfg Config, opts Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.ConsoleURL = cfg.consoleURL()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if os.Getenv("GOMAXPROCS") == "" && cfg.SpareProcs > 0 {
		runtime.GOMAXPROCS(defaultProcs() + cfg.SpareProcs)
	}
	if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.Data, err)
	}
	svc := &Service{cfg: cfg, log: log}
	var failed func(error)
	var failMu sync.Mutex
	store, err := persistence.Open(persistence.Options{
		Path: filepath.Join(cfg.Data, JournalFile), JournalDir: cfg.JournalDir, CheckpointInterval: cfg.CheckpointInterval, Logger: log,
		CommitFault: opts.CommitFault,
		OnFailure: func(err error) {
			failMu.Lock()
			f := failed
			failMu.Unlock()
			if f != nil {
				f(err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	svc.store = store
	if svc.keys, err = loadKeyring(store, time.Now()); err != nil {
		store.Close()
		return nil, err
	}
	if svc.links, err = loadLinkSigner(store); err != nil {
		store.Close()
		return nil, err
	}
	pool, _ := policy.ParseAmount(cfg.PracticePool)
	messenger, err := newMessenger(cfg, opts, svc.links)
	if err != nil {
		store.Close()
		return nil, err
	}
	svc.hooks = webhook.NewSender(webhook.Options{PrivateLiveTargets: cfg.PrivateWebhookTargets})
	var hooks actors.WebhookSender = svc.hooks
	if cfg.MetricsAddr != "" {
		svc.metrics = metrics.New()
		svc.metrics.WatchStore(store)
		hooks = svc.metrics.Webhooks(hooks)
	}
	svc.sys, err = actors.New(actors.Config{
		Store: store, Clock: opts.Clock, Signer: keyringSigner{svc.keys}, Logger: log,
		PracticeRail: rail.NewSimulated(rail.SimulatedOptions{Latency: cfg.SimulatedLatency}),
		ConsoleURL:   cfg.ConsoleURL, IdleTimeout: cfg.IdleTimeout, SettleTimeout: cfg.SettleTimeout,
		ProcessingAfter: cfg.ProcessingAfter,
		PracticePool:    pool, LoosenDelay: cfg.LoosenDelay, Messenger: messenger,
		WebhookSender: hooks, PrivateWebhookTargets: cfg.PrivateWebhookTargets,
	})
	if err != nil {
		store.Close()
		return nil, err
	}
	failMu.Lock()
	failed = svc.sys.StoreFailed
	failMu.Unlock()
	var observer transport.RequestObserver
	if svc.metrics != nil {
		svc.metrics.WatchSystem(svc.sys)
		observer = svc.metrics
	}
	limits := newLimiter(cfg, opts.Clock, svc.sys)
	pages, err := console.New(console.Config{System: svc.sys, Links: svc.links, Limits: limits, JWKS: svc.keys.JWKS,
		URL: cfg.ConsoleURL, Logger: log})
	if err != nil {
		svc.sys.Close()
		store.Close()
		return nil, err
	}
	svc.api = transport.NewServer(transport.Config{System: svc.sys, JWKS: svc.keys.JWKS, Logger: log,
		AccessLogger: opts.AccessLogger, Limits: limits, Pages: pages, AccessLog: cfg.AccessLog, Metrics: observer})
	return svc, nil
}

// newMessenger builds the sender of approval notices: chat always, e-mail
// when the operator configured a mail server.
func newMessenger(cfg Config, opts Options, links *approvallink.Signer) (*notify.Sender, error) {
	nc := notify.Config{Links: links, Now: time.Now, PrivateLiveTargets: cfg.PrivateWebhookTargets}
	if opts.Clock != nil {
		nc.Now = opts.Clock.Now
	}
	if cfg.SMTPAddr != "" {
		nc.SMTP = &notify.SMTPConfig{Addr: cfg.SMTPAddr, From: cfg.SMTPFrom, Username: cfg.SMTPUsername,
			Password: cfg.SMTPPassword, RequireTLS: cfg.SMTPRequireTLS}
	}
	return notify.New(nc)
}

// newLimiter builds the rate limiter of cfg, or nil when limits are off.
// An injected clock drives the limiter too, so a test that advances a
// fake clock refills the buckets. The daily limits start each subject's
// allowance from the journal (an agent's spends, an owner's new keys):
// buckets live in memory, and a restart must not hand back a day's
// allowance.
func newLimiter(cfg Config, clock actors.Clock, sys *actors.System) *ratelimit.Limiter {
	if !cfg.RateLimits {
		return nil
	}
	var c ratelimit.Clock // nil: the monotonic clock
	if clock != nil {
		c = clock
	}
	l := ratelimit.New(ratelimit.DefaultTable().Scaled(cfg.RateLimitScale), c)
	l.Recall(func(name ratelimit.Name, livemode bool, subject string, within time.Duration) ([]time.Duration, error) {
		if name == ratelimit.KeyChanges {
			return sys.KeyChangeAges(subject, livemode, within)
		}
		return sys.SpendAges(subject, within)
	}, ratelimit.SpendsDaily, ratelimit.KeyChanges)
	return l
}

// System exposes the actors (for the command's bootstrap and tests).
func (s *Service) System() *actors.System { return s.sys }

// Store exposes the journal (for consistency checks in tests).
func (s *Service) Store() *persistence.Store { return s.store }

// Links mints and verifies the signed approval links of notifications.
func (s *Service) Links() *approvallink.Signer { return s.links }

// JWKS is the public receipt key set.
func (s *Service) JWKS() []byte { return s.keys.JWKS() }

// ReceiptKeyID is the id of the key that signs receipts now.
func (s *Service) ReceiptKeyID() string { return s.keys.Current().ID }

// Handler is the API's request handler, for in-process benchmarks.
func (s *Service) Handler() fasthttp.RequestHandler { return s.api.Handler() }

// Serve answers HTTP on ln until Shutdown.
func (s *Service) Serve(ln net.Listener) error { return s.api.Serve(ln) }

// ServeOperator answers the operator listener on ln (see
// Config.MetricsAddr) until Shutdown. Without metrics_addr it has nothing
// to serve and refuses.
func (s *Service) ServeOperator(ln net.Listener) error {
	if s.metrics == nil {
		_ = ln.Close()
		return errors.New("wire: the operator listener needs metrics_addr")
	}
	s.opMu.Lock()
	if s.stopping {
		s.opMu.Unlock()
		_ = ln.Close()
		return nil
	}
	// Slow clients get no more than a scrape needs; a CPU profile or a
	// trace takes as long as its seconds parameter asks.
	srv := &http.Server{Handler: s.metrics.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.operator = srv
	s.opMu.Unlock()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown finishes in-flight requests, stops the actors (cancelling
// vendor calls, whose outcome the next start verifies) and flushes the
// journal.
func (s *Service) Shutdown(ctx context.Context) error {
	var err error
	s.closed.Do(func() {
		// The operator listener stops at once: a profile in progress is
		// cut short rather than hold the stop.
		s.opMu.Lock()
		s.stopping = true
		if s.operator != nil {
			_ = s.operator.Close()
		}
		s.opMu.Unlock()
		err = s.api.Shutdown(ctx)
		s.sys.Close()
		s.hooks.Close()
		if cerr := s.store.Close(); cerr != nil && err == nil {
			err = cerr
		}
	})
	return err
}

// keyringSigner adapts the receipt keyring to the actors' Signer.
type keyringSigner struct{ kr *receipt.Keyring }

func (k keyringSigner) Sign(c policy.ReceiptClaims) (string, string, error) {
	return k.kr.SignWithKeyID(c)
}

const signingKeysBucket = "signing_keys"

// loadKeyring reads the receipt signing keys, creating the first one.
func loadKeyring(store *persistence.Store, now time.Time) (*receipt.Keyring, error) {
	kr, err := readKeyring(store)
	if err != nil || kr != nil {
		return kr, err
	}
	k, err := receipt.GenerateKey(rand.Reader, now)
	if err != nil {
		return nil, err
	}
	b, err := k.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if err := commitOps(store, []persistence.Op{persistence.Put(signingKeysBucket, []byte(k.ID), b)}); err != nil {
		return nil, fmt.Errorf("storing the first receipt key: %w", err)
	}
	return receipt.NewKeyring(k)
}

const linkKeysBucket = "link_keys"

// loadLinkSigner reads the approval-link key, creating it durably on the
// first start so links sent before a restart still open after it.
func loadLinkSigner(store *persistence.Store) (*approvallink.Signer, error) {
	name := []byte("current")
	var key []byte
	err := store.Scan(linkKeysBucket, nil, nil, false, func(k, v []byte) bool {
		if string(k) == string(name) {
			key = append([]byte(nil), v...)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("reading the approval link key: %w", err)
	}
	if key == nil {
		if key, err = approvallink.NewKey(); err != nil {
			return nil, err
		}
		if err := commitOps(store, []persistence.Op{persistence.Put(linkKeysBucket, name, key)}); err != nil {
			return nil, fmt.Errorf("storing the approval link key: %w", err)
		}
	}
	return approvallink.New(key)
}

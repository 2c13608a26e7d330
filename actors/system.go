package actors

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/agentpay/guard/internal/fastjson"
	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/policy"
)

// Rail pays vendors. The practice rail simulates a vendor; the live rail
// speaks x402. Implementations live in the transport.
type Rail interface {
	Pay(ctx context.Context, p policy.Payment) policy.RailOutcome
	// Verify checks a payment whose outcome was unknown, by its nonce. It
	// never pays again.
	Verify(ctx context.Context, p policy.Payment) policy.RailOutcome
}

// InstantRail is a Rail that can answer some payments at once, in the
// caller's goroutine: the practice rail's simulated vendor when it has no
// latency to simulate. Its answer must be a pure function of the payment
// with no effect outside this process, since it comes before the journal
// holds the payment's nonce: the outcome is recorded with the spend in one
// journal record, and a crash before that record is durable loses the
// payment and the simulated vendor's memory of it alike. Such a spend goes
// from new straight to settled, failed or processing, as the spec's table
// has it, without the approved state a payment waiting for a vendor shows.
type InstantRail interface {
	Rail
	// PayNow is Pay when its outcome is known at once; ok false sends the
	// payment the usual way (journaled first, paid from a worker).
	PayNow(p policy.Payment) (o policy.RailOutcome, ok bool)
}

// Signer signs receipts.
type Signer interface {
	Sign(c policy.ReceiptClaims) (jws, kid string, err error)
}

// Config wires the actors to their collaborators.
type Config struct {
	Store  *persistence.Store
	Clock  Clock
	Signer Signer
	// PracticeRail pays practice spends; LiveRail live ones. A nil LiveRail
	// makes every live payment fail with rail_not_configured (no money moves).
	PracticeRail Rail
	LiveRail     Rail
	Logger       *slog.Logger
	// ConsoleURL is the owner console base address, for approval links.
	ConsoleURL string
	// IdleTimeout passivates an agent actor after this long without messages.
	IdleTimeout time.Duration
	// SettleTimeout bounds one call to a rail; past it the outcome is unknown.
	SettleTimeout time.Duration
	// ProcessingAfter is how long a payment may be with its vendor and
	// still read approved: past it the spend reads processing and the
	// request that made it is answered. Default 5 s.
	ProcessingAfter time.Duration
	// VerifyBackoff are the delays between verifications of a processing spend;
	// the last one repeats.
	VerifyBackoff []time.Duration
	// PracticePool is the pool a new practice environment starts with.
	PracticePool policy.Amount
	// RequestTimeout bounds how long a caller waits for an agent actor.
	RequestTimeout time.Duration
	// LoosenDelay is how long a loosening policy change waits before it
	// applies (and can be cancelled).
	LoosenDelay time.Duration
	// Messenger sends approval notices through the owners' notification
	// channels; nil sends nothing and refuses new channels.
	Messenger Messenger
	// NotifyBackoff are the delays between attempts of an approval notice
	// that failed; past its end the last delay repeats. A notice is not
	// retried past its approval's expiry, nor once it is decided.
	NotifyBackoff []time.Duration
	// NotifyTimeout bounds one attempt to send a notice.
	NotifyTimeout time.Duration
	// WebhookSender sends webhook deliveries; nil keeps them queued.
	WebhookSender WebhookSender
	// PrivateWebhookTargets lets live webhook endpoints and chat channels
	// name loopback, private and other non-public hosts (see
	// checkWebhookURL).
	PrivateWebhookTargets bool
}

// Validate fills defaults and reports the first missing collaborator.
func (c *Config) Validate() error {
	switch {
	case c.Store == nil:
		return errors.New("actors: Config.Store is required")
	case c.Signer == nil:
		return errors.New("actors: Config.Signer is required")
	case c.PracticeRail == nil:
		return errors.New("actors: Config.PracticeRail is required")
	}
	if c.Clock == nil {
		c.Clock = SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 2 * time.Minute
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = 20 * time.Second
	}
	if c.ProcessingAfter <= 0 {
		c.ProcessingAfter = DefaultProcessingAfter
	}
	if len(c.VerifyBackoff) == 0 {
		c.VerifyBackoff = []time.Duration{2 * time.Second, 5 * time.Second, 15 * time.Second, time.Minute}
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.LoosenDelay <= 0 {
		c.LoosenDelay = time.Hour
	}
	if len(c.NotifyBackoff) == 0 {
		c.NotifyBackoff = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
			5 * time.Minute, 10 * time.Minute, 15 * time.Minute}
	}
	if c.NotifyTimeout <= 0 {
		c.NotifyTimeout = 30 * time.Second
	}
	if c.ConsoleURL == "" {
		c.ConsoleURL = "http://127.0.0.1:8080/console"
	}
	return nil
}

// System is the running set of actors: one per active agent, sharing the
// owner environments, the settlement workers, the expiry timers and the
// change hub.
type System struct {
	cfg   Config
	store *persistence.Store
	// partsPassedOver counts the hours of spends and the blocks of
	// events that lists passed over unread (spend_hours.go,
	// event_blocks.go).
	partsPassedOver atomic.Int64
	clock           Clock
	log             *slog.Logger
	actors          *actor.ActorSystem

	regMu  sync.RWMutex
	agents map[string]*agentEntry

	envMu sync.Mutex
	envs  sync.Map // owner id|env -> *envLedger; envMu serializes loading

	// keyChangeMu serializes the key changes whose checks read the store:
	// rotations (a key is rotated once), revocations and owner key
	// creations (the quota). A check and its commit must not interleave
	// with another's, and a change is readable only once durable, so the
	// lock is held until the journal record is. These changes are rare.
	keyChangeMu sync.Mutex
	// archiveMu orders archives across both environments of every owner,
	// whose archived agents share one quota (see changeAgent).
	archiveMu sync.Mutex
	// keyCache maps the SHA-256 of a secret to its key. A map under a
	// read lock rather than a sync.Map: its array key would be boxed, one
	// allocation per request. keyMu guards it.
	keyCache map[[sha256.Size]byte]*cachedKey
	keyMu    sync.RWMutex
	keyEpoch atomic.Uint64 // moves on every forgetKey

	hub    *hub
	timers *expiryTimers
	// pool runs agent mailboxes and settlement calls on kept goroutines.
	pool *workerPool
	// wakes cuts verification delays short when a practice clock moves.
	wakes practiceWakes
	// notifier sends approval notices; nil without a Messenger.
	notifier *notifier
	// channelMu serializes notification channel changes, whose quota
	// check reads the store (see CreateNotificationChannel).
	channelMu sync.Mutex
	// webhooks delivers events to the owners' webhook endpoints.
	webhooks *webhooks

	ctx    context.Context // ends at Close: stops settlement and verification
	cancel context.CancelFunc
	work   sync.WaitGroup // settlement and verification goroutines
	busy   workCounter    // of those, the ones not parked on a timer
	// sentTotal counts messages sent to agents, so Quiesce can tell that
	// nothing moved while it looked.
	sentTotal atomic.Uint64
	// eventsDeleted counts the events the retention sweep deleted.
	eventsDeleted atomic.Uint64
	closed        atomic.Bool
}

// poolWorkers is how many goroutines the worker pool keeps: enough for the
// mailboxes and rail calls in flight at once under a full load of two cores,
// beyond which work runs on fresh goroutines.
const poolWorkers = 128

// DefaultProcessingAfter is Config.ProcessingAfter when none is given: a
// request that pays waits this long at most for its vendor.
const DefaultProcessingAfter = 5 * time.Second

// New starts the actor system and resumes the work that a previous run left
// open: approvals to expire, payments to send or verify.
func New(cfg Config) (*System, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &System{keyCache: map[[sha256.Size]byte]*cachedKey{},
		cfg: cfg, store: cfg.Store, clock: cfg.Clock, log: cfg.Logger,
		actors: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return cfg.Logger.With("lib", "protoactor")
		})),
		agents: make(map[string]*agentEntry),
		ctx:    ctx, cancel: cancel,
	}
	s.pool = newWorkerPool(poolWorkers)
	s.hub = newHub()
	s.timers = newExpiryTimers(s)
	if err := s.indexOwnerKeys(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.indexSpendHours(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.indexEventBlocks(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.finishResets(); err != nil {
		s.Close()
		return nil, err
	}
	s.webhooks = newWebhooks(s)
	if err := s.webhooks.start(); err != nil {
		s.Close()
		return nil, fmt.Errorf("actors: loading webhooks: %w", err)
	}
	if err := s.resume(); err != nil {
		s.Close()
		return nil, err
	}
	s.notifier = startNotifier(s)
	s.startEventRetention()
	return s, nil
}

// Close stops accepting work, cancels settlement calls (their outcome is
// then verified on the next start, never re-guessed), stops every actor and
// the hub. The store is closed by its owner.
func (s *System) Close() {
	if s.closed.Swap(true) {
		return
	}
	s.timers.stop()
	s.webhooks.stop()
	s.cancel()
	s.notifier.stop()
	s.work.Wait()
	s.regMu.Lock()
	for id, e := range s.agents {
		s.actors.Root.Stop(e.pid)
		delete(s.agents, id)
	}
	s.regMu.Unlock()
	s.actors.Shutdown()
	s.hub.close()
	s.pool.stop()
}

// AnswerInFlight has every active agent answer, now, the payments that
// wait for their vendor, with their recorded state (see answerInFlight).
// A stopping server calls it shortly before its deadline, so that no
// request is cut off unanswered; the payments themselves go on.
func (s *System) AnswerInFlight() {
	for _, id := range s.activeAgents() {
		s.send(id, &answerInFlight{})
	}
}

// activeAgents lists the agents whose actors run now.
func (s *System) activeAgents() []string {
	s.regMu.RLock()
	defer s.regMu.RUnlock()
	ids := make([]string, 0, len(s.agents))
	for id := range s.agents {
		ids = append(ids, id)
	}
	return ids
}

// resume activates every agent with active spends so that each resumes its
// own open work, and every agent with versions of its rules not announced
// yet, so that what came due while the service was down is announced now
// and what still waits has its timer again (see applyDuePolicy).
func (s *System) resume() error {
	seen := map[string]bool{}
	err := s.store.Scan(bActive, nil, nil, false, func(k, _ []byte) bool {
		if i := indexByte(k, '|'); i > 0 {
			seen[string(k[:i])] = true
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("actors: scanning active spends: %w", err)
	}
	if err := s.unannouncedPolicies(seen); err != nil {
		return fmt.Errorf("actors: scanning waiting rule changes: %w", err)
	}
	for id := range seen {
		s.send(id, &resumeWork{})
	}
	return nil
}

// unannouncedPolicies adds to agents every live agent with a version of
// its rules after the last one it announced (Agent.PolicyVersion) that
// was not cancelled: one waiting, or one that came due unannounced. Keys
// of bPolicies are the agent id, '|' and the version in 8 bytes, so an
// agent's versions are adjacent and its record is read only once it has a
// second version.
func (s *System) unannouncedPolicies(agents map[string]bool) error {
	var (
		cur       string
		announced = -1 // the agent's PolicyVersion; -1 until read
	)
	var lookupErr error
	err := s.store.Scan(bPolicies, nil, nil, false, func(k, v []byte) bool {
		if len(k) < 9 || k[len(k)-9] != '|' {
			return true
		}
		id, version := k[:len(k)-9], int(binary.BigEndian.Uint64(k[len(k)-8:]))
		if string(id) != cur {
			cur, announced = string(id), -1
		}
		if version <= 1 || agents[cur] {
			return true
		}
		if announced < 0 {
			var ag Agent
			ok, err := s.getJSON(bAgents, id, &ag)
			if err != nil {
				lookupErr = err
				return false
			}
			announced = ag.PolicyVersion
			if !ok || ag.Status == AgentArchived {
				announced = math.MaxInt // nothing of it will apply
			}
		}
		if version <= announced {
			return true
		}
		var p policy.Policy
		if jsonUnmarshal(v, &p) != nil {
			return true
		}
		if c, err := s.store.Get(bPolicyCancels, []byte(p.ID)); err != nil {
			lookupErr = err
			return false
		} else if c == nil {
			agents[cur] = true
		}
		return true
	})
	if err == nil {
		err = lookupErr
	}
	return err
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// agentEntry is a registry slot. sent counts messages delivered to the
// actor, so passivation can prove its mailbox is empty.
type agentEntry struct {
	pid  *actor.PID
	sent atomic.Uint64
	// view is the agent's latest published snapshot, for reads.
	view atomic.Pointer[agentView]
	// readSince is set by every read answered from view and cleared by the
	// actor's idle check: an agent that is only read (an agent polling its
	// balance) is in use, and passivating it would only mean reloading it
	// from disk on the next read.
	readSince atomic.Bool
}

// markRead records a read of the agent's snapshot. It writes only when the
// flag is clear, so a hot agent read from many cores does not bounce the
// cache line on every request.
func (e *agentEntry) markRead() {
	if !e.readSince.Load() {
		e.readSince.Store(true)
	}
}

// send delivers msg to the agent's actor, activating it when needed. The
// read lock is held across the send so a passivating actor, which takes the
// write lock, knows no message is on its way.
func (s *System) send(agentID string, msg any) {
	for {
		s.regMu.RLock()
		e, ok := s.agents[agentID]
		if ok {
			e.sent.Add(1)
			s.sentTotal.Add(1)
			s.actors.Root.Send(e.pid, msg)
			s.regMu.RUnlock()
			return
		}
		s.regMu.RUnlock()
		s.activate(agentID)
	}
}

func (s *System) activate(agentID string) {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if _, ok := s.agents[agentID]; ok {
		return
	}
	e := &agentEntry{}
	props := actor.PropsFromProducer(func() actor.Actor { return newAgentActor(s, agentID, e) },
		actor.WithDispatcher(s.pool))
	e.pid = s.actors.Root.Spawn(props)
	s.agents[agentID] = e
}

// passivate removes the agent's entry if every message sent to it was
// received. Called from the actor itself.
func (s *System) passivate(agentID string, e *agentEntry, received uint64) bool {
	s.regMu.Lock()
	defer s.regMu.Unlock()
	if cur, ok := s.agents[agentID]; !ok || cur != e || e.sent.Load() != received {
		return false
	}
	delete(s.agents, agentID)
	return true
}

// dropAgent forgets an actor that stopped itself after its state went
// ahead of the disk; the next message activates a fresh one from disk.
func (s *System) dropAgent(agentID string, e *agentEntry) {
	s.regMu.Lock()
	if cur, ok := s.agents[agentID]; ok && cur == e {
		delete(s.agents, agentID)
	}
	s.regMu.Unlock()
}

// ActiveAgents is the number of activated agent actors.
func (s *System) ActiveAgents() int {
	s.regMu.RLock()
	defer s.regMu.RUnlock()
	return len(s.agents)
}

// ask sends a request carrying its own reply channel and waits for the
// answer. Callers are HTTP handlers, never actors.
func ask[T any](ctx context.Context, s *System, agentID string, build func(reply chan T) any) (T, error) {
	var zero T
	if s.closed.Load() {
		return zero, &Error{Code: CodeUnavailable, Message: "The service is shutting down; retry shortly.", RetryAfter: 1}
	}
	reply := make(chan T, 1)
	s.send(agentID, build(reply))
	t := time.NewTimer(s.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return zero, &Error{Code: CodeTimeout, Message: "The request was cancelled before the agent answered."}
	case <-t.C:
		return zero, &Error{Code: CodeTimeout, RetryAfter: 1, Message: "The agent did not answer in time; retry with the same Idempotency-Key."}
	}
}

// getJSON reads and decodes one stored value; found is false when absent.
func (s *System) getJSON(bucket string, key []byte, v any) (bool, error) {
	b, err := s.store.Get(bucket, key)
	if err != nil || b == nil {
		return false, err
	}
	if err := fastjson.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("actors: decoding %s/%s: %w", bucket, key, err)
	}
	return true, nil
}

// StoreFailed is called when the journal lost a commit: every actor whose
// memory may be ahead of the disk is stopped and every cached environment
// dropped, so the next request reloads what is really durable.
func (s *System) StoreFailed(err error) {
	s.log.Error("journal commit failed; reloading every agent from disk", "err", err)
	s.regMu.Lock()
	for id, e := range s.agents {
		s.actors.Root.Stop(e.pid)
		delete(s.agents, id)
	}
	s.regMu.Unlock()
	s.envMu.Lock()
	s.envs.Clear()
	s.envMu.Unlock()
	s.keyMu.Lock()
	clear(s.keyCache)
	s.keyMu.Unlock()
}

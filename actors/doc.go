// Package actors is the concurrent shell around the pure policy core: one
// protoactor-go actor per agent, the owner environments they share, the
// settlement workers, the approval expiry timers, the change hub and the
// webhook supervisor.
//
// # Model
//
// An agent actor is activated by the first message for its agent (it loads
// the agent, its policy in effect, its counters and its active spends from
// the store) and passivates after IdleTimeout without messages, once every
// change it made is durable and no payment of it is in flight. A registry
// counts the messages sent to each actor, so passivation can prove its
// mailbox is empty: two incarnations of one agent never run at once.
//
// Every spend decision runs inside the actor, with the environment's lock
// held only for the pure decision and the append to the journal queue. The
// environment (an owner's practice or live pool and event sequence) is a
// small locked ledger rather than an actor of its own: a spend needs the
// agent's counters and the pool in one decision, and splitting that across
// two mailboxes would let two spends interleave between the halves.
//
// # Durability
//
// Persist, then act, then reply. A change is appended to the journal as one
// record (spend, indexes, counters, environment state, events; the
// Idempotency-Key's record is the spend's entry in its agent's index, which
// the actor reads back through a hash of the keys of the last 48 hours, see
// idempotency.go) and the caller receives the record's ticket; the HTTP handler
// answers only when the ticket is durable, the settlement worker calls the
// vendor only when the approval (with its payment nonce) is durable, and the
// hub tells watchers and subscribers only about durable changes. A payment
// whose outcome is unknown is `processing` and is verified with the same
// nonce, never paid again.
//
// One exception to "journal the nonce, then pay": a rail that answers at
// once with no effect outside this process (an InstantRail: the practice
// vendor without simulated latency) is asked inside the actor, and its
// outcome goes into the spend's first record. Nothing outside the process
// can have been paid, so a crash before that record is durable leaves
// nothing to verify; the spend goes from new straight to settled, failed
// or processing with that state's event, as spec 3's table has it, in one
// commit instead of two. If the journal loses a commit, StoreFailed stops
// every actor so the next request reloads what is really on disk.
//
// # Concurrency
//
// No actor waits on anything: requests carry their own reply channel, rail
// calls run in worker goroutines owned by the System (stopped by Close),
// timers only send messages. Callers of the System API are HTTP handlers,
// never actors.
//
// # Notifications
//
// The notifier (notifier.go) hears approval.requested from the hub, so only
// once the approval is durable, and sends it through every notification
// channel of the owner environment with the injected Messenger, each
// delivery in a goroutine of its own: the spend path never waits for a mail
// server. Failures are retried after Config.NotifyBackoff while the
// approval is pending; a delivery is marked in the journal, and on start
// every pending approval without its mark is sent again (at least once).
//
// Webhooks follow the same rule: an event is fanned out to the endpoints
// that subscribe to it only once it is durable, each delivery is journaled
// before its first attempt, and every attempt's outcome before the next
// (webhooks*.go). Delivery runs in goroutines of the webhook supervisor,
// one per endpoint with work, never in an agent actor.
//
// # Caveats
//
// A payment for a rail that takes its time (live, or practice with
// simulated latency) is dispatched to the rail at once, and reads approved
// until the rail answers (journaling processing before every call would
// cost each payment a commit and an event). A cancel in that window waits
// for the rail's answer and answers from the outcome: cancel_too_late once
// settled or processing, state_conflict once failed. No spend that reads
// approved is answered cancel_too_late.
package actors

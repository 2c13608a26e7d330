// Package bench is the load generator behind `make bench` and the
// guard-bench command: it answers "how many durable spends per second, at
// what latency, and what does an idle agent cost?" for an operator sizing a
// deployment, and for a developer checking that a change did not make the
// money path slower.
//
// # What a run does
//
// Run starts the service in-process through cmd/wire, exactly as `guard
// serve` does (a fresh temporary data directory, the journal fsynced before
// every answer: the numbers are those of a durable service), or, with
// Config.Target, drives a server that is already running. It then:
//
//  1. Creates the agents of the load over the HTTP API (POST /v1/agents and
//     POST /v1/agents/{id}/keys). In-process, it first bootstraps one
//     practice owner per five agents through System().CreateOwner, each with
//     a pool large enough never to run dry. Against a target it uses the
//     given owner keys: it reuses the active agents earlier runs made
//     (named guard-bench-...), publishing the load's rules again on any
//     whose rules changed since, and creates agents only for the rest
//     while the owner has room (five active practice agents per owner at
//     most); it never archives one. The keys earlier runs left active on
//     an agent it reuses (a killed run's) are revoked as it takes the
//     agent: the agent is the bench's, and so are its keys. Each agent
//     gets a new key, revoked when the run ends, however it ends; a key
//     the bench cannot revoke then is named with how to revoke it.
//     Every agent's rules trust api.vendor.com and have limits the load
//     never reaches, so every spend takes the full path: rules, hold,
//     journal, simulated vendor, receipt, journal again.
//  2. Runs three phases (or those named in Config.Phases), one after the
//     other, each Warmup unmeasured then Duration measured, from Conns
//     connections with one request in flight on each (fasthttp
//     HostClient, keep-alive, loopback):
//     POST /v1/spends with a unique Idempotency-Key, an amount from 0.01 to
//     0.99 and a resource no earlier spend bought, spread uniformly over the
//     agents; GET /v1/balance; POST /v1/spends/check.
//     Unless CeilingDuration is zero, the same load also drives a local
//     server whose handler only writes a fixed balance-sized answer, for
//     CeilingDuration before the first read phase, between the reads and
//     after the last: the loopback ceiling. In-process and unpaced, each
//     read phase is reported as a share of the mean of the two slices
//     around it, so a shared machine whose speed drifts within the run
//     still compares like with like (CeilingReport). Against a target
//     (another process, perhaps another machine) or paced by Rate, the
//     reads are no share of a do-nothing handler in the bench's own
//     process driven flat out: the ceiling is shown, with why it is not
//     compared.
//     The spends phase is bracketed the same way, before and after (its
//     capacity search included), by the spend floor: the spends' own
//     requests against a handler that signs one receipt with the
//     service's Ed25519 code and writes a settled spend's answer, with no
//     rules, journal or fsync (FloorReport). It is the most any design of
//     the service could settle on this machine with this load.
//  3. In-process only, measures an idle agent: it creates IdleAgents more
//     agents through the System API, waits for every actor to passivate,
//     reads HeapAlloc (after two forced collections), activates each new
//     agent with one Balance call, reads HeapAlloc again, and divides the
//     difference by IdleAgents. It then waits for them to passivate
//     (IdleTimeout, short on purpose) and reads the heap a third time, which
//     should be back near the baseline.
//
// # What the numbers mean
//
// By default each connection sends its next request as soon as the last
// is answered (a closed loop): the run finds the most the service can do,
// and its latencies are mostly time spent queueing behind the other
// connections (64 connections at 5,000/s wait 13 ms on average whatever
// the service does). Config.Rate paces the load instead (an open loop):
// each connection sends on a fixed schedule, together Rate requests per
// second, and a latency runs from when the request was due. A service
// that stalls delays every request due during the stall, and each of them
// counts the stall in full, where a closed loop would count it once
// (coordinated omission). Requests still due when the window closes on a
// connection that is behind are reported as not sent. That answers the
// operator's other question: at the rate we expect, what latency?
// Config.CapacityP99 turns it round, at what rate that latency: after the
// unpaced spends phase, paced spends phases at rates bisected below it
// find the most spends/s whose p99 stays within the bound
// (CapacityReport).
//
// A request counts when it was answered inside the measured window and,
// in a closed loop, started in it; in an open loop, was due in it, however
// late it was sent. A request still unanswered as the window closes is
// counted apart, with how long the oldest such request had waited by
// then: a few per connection are the load in flight, a long wait is a
// stall past the window. They are waited for up to a second more (so the
// next phase starts on an idle server), then abandoned; an interrupt
// abandons them at once. Settled spends/s counts answers whose spend
// status is "settled"; anything else is tallied by status (and declined
// ones by reason), and non-2xx answers by HTTP status and error code.
// Latency is measured at the client, from just before the request is
// written (or, paced, from when it was due) to when its answer has been
// read, and kept in a log-linear histogram whose buckets are under 1% wide
// (the layout of an HDR histogram): the reported percentiles are upper
// bounds of their bucket, and the maximum is the exact latency of the
// slowest answered request. A request left unanswered as the window closed
// is in neither: its wait shows as the oldest unanswered, which bounds its
// latency from below. Each phase also gives its rate in each tenth of the
// window (PhaseReport.Timeline), so that a service that slows as it runs
// is not averaged into a steady figure.
//
// In-process, the report also shows what the journal did during the spends
// window (group commits per second, records per commit, the distribution
// of the commits' durations and the share of the window spent committing)
// and the CPU the process used, in percent of one core: together they tell
// whether a run was bound by the disk, by the CPU, or by neither (waiting
// somewhere).
// The load average as each window opened is printed too: other work on
// the machine skews every number.
//
// # When a run fails
//
// A run whose figures do not measure a working service is an error that
// says why, with the report (Report.Failures): a phase with transport
// errors (refused, reset or timed-out connections), 5xx answers, or a
// stall (nothing answered while requests waited, or one waiting through
// the whole window); most answers 429 (the target's rate limits); most
// spends declined. After a phase that failed on the server's side, the
// bench asks the server for GET /healthz and, with no answer, runs no
// later phase. An interrupted run (ctx ending) reports what it measured,
// marked Report.Interrupted, with the phases it never ran.
//
// # Caveats
//
// In-process, the load generator and the service share one process and its
// cores; on a small machine the generator's own CPU is a noticeable part of
// the total. Against a target, spends pay practice money from the owner's
// pool, which a long run can exhaust, and the owner's reserve_floor keeps
// part of even a full pool out of reach: declines then show in the
// report, which also says what the run deposited, spent, made and
// revoked there (TargetChanges).
// Config.CPUProfile and Config.Trace capture one phase (ProfilePhase) for
// `go tool pprof` and `go tool trace`. Config.DataDir and Config.JournalDir
// choose the disks of the in-process service's data and journal.
package bench

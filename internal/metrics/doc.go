// Package metrics counts what the service does, for its operators, and
// serves the counts in the Prometheus text format on the operator
// listener (`guard serve -metrics-addr`), beside the runtime's profiles.
//
// What it counts, and where each number comes from:
//   - guard_http_requests_total and guard_http_request_duration_seconds:
//     every answered request, by method, route pattern and status, as the
//     API's request wrapper saw it. Route patterns, not paths, so that ids
//     never become series.
//   - guard_events_total: every event made durable, by type and mode
//     (spend.settled, spend.declined, ...): the spends' outcomes as owners
//     hear of them, counted once each, after the journal holds them.
//   - guard_webhook_attempts_total and guard_webhook_attempt_duration_seconds:
//     each delivery attempt, by result (delivered, rejected, no_answer).
//   - guard_journal_* and guard_checkpoint_*: the store's group commits,
//     their records and failures, the fdatasync-bound commit duration, and
//     how far the snapshot trails the journal. Read from the store when
//     scraped; nothing on the commit path changes.
//   - guard_agents_active: agents activated now (passivated ones cost
//     nothing and are not counted).
//   - guard_events_deleted_total: events the retention sweep deleted from
//     the data file, 30 days and a day after they were made.
//   - go_* and process_*: the runtime and the process, from the client
//     library's own collectors.
//
// A Metrics is built once per service and never global: tests and
// benchmarks run several services in one process.
package metrics

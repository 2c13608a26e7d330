// Package policy is the pure domain core of the payment guard: money, host
// patterns, the owner's rules, the spend state machine, balances and the
// check simulation.
//
// Nothing here starts a goroutine, performs I/O or reads the wall clock: every
// function that depends on time takes `now` as an argument, so the same inputs
// always give the same decision. That is what lets the actors replay a journal
// into exactly the state they had, and what lets the tests pin decisions in
// golden files.
//
// Money is always an Amount backed by cockroachdb/apd; no float ever touches a
// balance. Hosts are compared in canonical form (lower case, IDNA A-labels).
//
// Invariants kept by the types in this package:
//   - a spend moves only along the transitions of the spec's part 3; an
//     impossible move panics, because it is a bug, not bad input;
//   - caps count settled amounts plus active holds, so a hold is reserved
//     before a vendor is paid and released on every exit that does not pay.
package policy

// Package randfill fills values of the service's types at random, for the
// tests that hold a hand-written or alternative encoder to encoding/json:
// every exported field set, pointers both nil and set, strings with quotes,
// HTML, control and non-ASCII characters, amounts of every scale, valid host
// patterns and times with and without fractions of a second.
package randfill

// Package logbatch writes log lines in batches. A server that logs a line
// per request would otherwise make a write system call per request, which
// on a busy server costs as much CPU as a good part of the request itself.
//
// A Batcher holds the lines written to it and writes them out together,
// at most an interval after the first of them (or as soon as they fill
// its buffer). Lines that must not wait (warnings, errors, the lines an
// operator watches for at start and stop) go through Urgent, which writes
// the held lines first and then its own, so the output keeps the order in
// which the lines were logged.
package logbatch

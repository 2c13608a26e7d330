// Package wire assembles the service from its parts: the journal, the
// receipt keys, the rails, the actor system and the HTTP API. It is the one
// place that knows every package; the command and the test harness both
// start the service through it, so tests run exactly what operators run.
package wire

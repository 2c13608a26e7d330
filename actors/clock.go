package actors

import "time"

// Clock is the time source of the actors. Tests inject a fake one; the
// practice clock of an owner is built on top of it.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine after d, unless stopped.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a scheduled call that can be cancelled.
type Timer interface{ Stop() bool }

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time                            { return time.Now().UTC() }
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

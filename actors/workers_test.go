package actors

import (
	"sync"
	"testing"
)

// Jobs that wait on each other must all run even when they outnumber the
// workers: the pool hands work only to idle workers and starts goroutines
// for the rest, so it can never deadlock.
func TestWorkerPoolRunsJobsThatWaitOnEachOther(t *testing.T) {
	p := newWorkerPool(2)
	defer p.stop()
	const n = 16
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	started.Add(n)
	finished.Add(n)
	for range n {
		p.Go(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait() // all n run at once although only 2 workers exist
	close(release)
	finished.Wait()
}

func TestWorkerPoolRunsJobsAfterStop(t *testing.T) {
	p := newWorkerPool(1)
	p.stop()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
}

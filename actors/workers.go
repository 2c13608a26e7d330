package actors

import "sync"

// workerPool runs short functions on long-lived goroutines. A fresh
// goroutine starts with a small stack that the agent's spend path grows
// several times (policy evaluation, JSON, signing): measured at about 7 %
// of the CPU of a settled spend under load. Kept goroutines keep their
// grown stacks.
//
// A job is handed only to a worker that is idle at that moment; when none
// is, it runs on a new goroutine. So the pool never queues work behind
// busy workers and cannot deadlock when jobs wait on each other.
type workerPool struct {
	jobs chan func()
	quit chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// poolThroughput is how many messages a mailbox run handles before it
// yields its worker, as protoactor's default dispatcher does.
const poolThroughput = 300

func newWorkerPool(workers int) *workerPool {
	p := &workerPool{jobs: make(chan func()), quit: make(chan struct{})}
	p.done.Add(workers)
	for range workers {
		go p.work()
	}
	return p
}

func (p *workerPool) work() {
	defer p.done.Done()
	for {
		select {
		case fn := <-p.jobs:
			fn()
		case <-p.quit:
			return
		}
	}
}

// Go runs fn on an idle worker or on a new goroutine.
func (p *workerPool) Go(fn func()) {
	select {
	case p.jobs <- fn:
	default:
		go fn()
	}
}

// Schedule and Throughput make the pool protoactor's mailbox dispatcher.
func (p *workerPool) Schedule(fn func()) { p.Go(fn) }
func (p *workerPool) Throughput() int    { return poolThroughput }

// stop lets the idle workers exit and waits for them; jobs already running
// finish first. Go still works afterwards (on new goroutines), so a late
// message during shutdown is never dropped by the pool.
func (p *workerPool) stop() {
	p.once.Do(func() { close(p.quit) })
	p.done.Wait()
}

package logbatch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is an output the batcher's timer and the test read safely.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *lockedBuffer) Writes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

func TestLinesAreHeldAndWrittenTogether(t *testing.T) {
	var out lockedBuffer
	b := New(&out, time.Hour, 1<<10)
	for i := range 3 {
		fmt.Fprintf(b, "line %d\n", i)
	}
	if s := out.String(); s != "" {
		t.Fatalf("written before the interval or a flush: %q", s)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if s, n := out.String(), out.Writes(); s != "line 0\nline 1\nline 2\n" || n != 1 {
		t.Fatalf("after Flush: %q in %d writes, want the three lines in one", s, n)
	}
}

func TestHeldLinesGoOutAfterTheInterval(t *testing.T) {
	var out lockedBuffer
	b := New(&out, 10*time.Millisecond, 1<<10)
	defer b.Close()
	fmt.Fprintln(b, "first")
	fmt.Fprintln(b, "second")
	deadline := time.Now().Add(10 * time.Second)
	for out.String() == "" && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s, n := out.String(), out.Writes(); s != "first\nsecond\n" || n != 1 {
		t.Fatalf("after the interval: %q in %d writes, want both lines in one", s, n)
	}
	// A later line arms the timer again.
	fmt.Fprintln(b, "third")
	for !strings.HasSuffix(out.String(), "third\n") && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := out.String(); s != "first\nsecond\nthird\n" {
		t.Fatalf("a line after the first batch: %q", s)
	}
}

func TestUrgentLinesKeepTheOrder(t *testing.T) {
	var out lockedBuffer
	b := New(&out, time.Hour, 1<<10)
	fmt.Fprintln(b, "access 1")
	fmt.Fprintln(b, "access 2")
	fmt.Fprintln(b.Urgent(), "error")
	if s := out.String(); s != "access 1\naccess 2\nerror\n" {
		t.Fatalf("an urgent line after held ones: %q, want the held lines first", s)
	}
	fmt.Fprintln(b, "access 3")
	if s := out.String(); strings.Contains(s, "access 3") {
		t.Fatalf("a line after the urgent one was not held: %q", s)
	}
}

func TestAFullBufferIsWrittenBeforeItOverflows(t *testing.T) {
	var out lockedBuffer
	b := New(&out, time.Hour, 16)
	fmt.Fprint(b, "0123456789\n") // 11 bytes: held
	if out.String() != "" {
		t.Fatal("a line that fits was written at once")
	}
	fmt.Fprint(b, "abcdefghij\n") // would make 22: the first goes out
	if s := out.String(); s != "0123456789\n" {
		t.Fatalf("after an overflowing line: %q, want only the first", s)
	}
	long := strings.Repeat("x", 40) + "\n"
	fmt.Fprint(b, long) // larger than the buffer: held lines, then itself
	if s := out.String(); s != "0123456789\nabcdefghij\n"+long {
		t.Fatalf("a line larger than the buffer: %q", s)
	}
}

func TestCloseWritesWhatIsHeldAndLaterLinesAtOnce(t *testing.T) {
	var out lockedBuffer
	b := New(&out, time.Hour, 1<<10)
	fmt.Fprintln(b, "held")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); s != "held\n" {
		t.Fatalf("after Close: %q", s)
	}
	fmt.Fprintln(b, "late")
	if s := out.String(); s != "held\nlate\n" {
		t.Fatalf("a line after Close: %q, want it written at once", s)
	}
}

func TestConcurrentLinesStayWhole(t *testing.T) {
	var out lockedBuffer
	b := New(&out, time.Millisecond, 256)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				w := b.Urgent()
				if i%3 != 0 {
					w = b
				}
				fmt.Fprintf(w, "g%d-%03d-%s\n", g, i, strings.Repeat("y", i%50))
			}
		})
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	last := map[string]int{}
	for _, l := range lines {
		var g, i int
		var tail string
		if _, err := fmt.Sscanf(l, "g%d-%03d-%s", &g, &i, &tail); err != nil && i%50 != 0 {
			t.Fatalf("a line cut or mixed: %q (%v)", l, err)
		}
		if len(tail) != i%50 || strings.Trim(tail, "y") != "" {
			t.Fatalf("a line cut or mixed: %q", l)
		}
		// Each goroutine's lines come out in the order it logged them.
		key := fmt.Sprint(g)
		if prev, ok := last[key]; ok && i != prev+1 {
			t.Fatalf("goroutine %d: line %d after %d", g, i, prev)
		}
		last[key] = i
	}
}

type failing struct{ calls int }

func (f *failing) Write(p []byte) (int, error) {
	f.calls++
	return 0, errors.New("output closed")
}

func TestAFailingOutputDropsTheHeldLines(t *testing.T) {
	f := &failing{}
	b := New(f, time.Hour, 16)
	if _, err := fmt.Fprint(b, "0123456789\n"); err != nil {
		t.Fatalf("a held line reported %v", err)
	}
	if _, err := fmt.Fprint(b, "abcdefghij\n"); err == nil {
		t.Fatal("an overflow onto a failing output reported no error")
	}
	if err := b.Flush(); err != nil || f.calls != 1 {
		t.Fatalf("Flush after the failure: %v after %d writes, want nothing left to write", err, f.calls)
	}
	if len(b.buf) != 0 {
		t.Fatalf("%d bytes still held after the failure", len(b.buf))
	}
}

package persistence

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CommitFault behaves like a failing disk: the batch fails, the generation
// moves on, nothing of it is readable, and commits work again once the
// fault clears.
func TestCommitFaultOption(t *testing.T) {
	var failing atomic.Bool
	failed := make(chan struct{}, 8)
	s, err := Open(Options{Path: filepath.Join(t.TempDir(), "j.db"),
		CommitFault: func(int) error {
			if failing.Load() {
				return errors.New("injected disk failure")
			}
			return nil
		},
		OnFailure: func(error) { failed <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	gen := s.Gen()
	failing.Store(true)
	if err := s.Append(gen, Record{Ops: []Op{Put("b", []byte("k"), []byte("v1"))}}).Wait(ctx); !errors.Is(err, ErrCommitFailed) {
		t.Fatalf("append under a fault: %v, want ErrCommitFailed", err)
	}
	if v, _ := s.Get("b", []byte("k")); v != nil {
		t.Fatalf("a failed commit is readable: %q", v)
	}
	if s.Gen() == gen {
		t.Fatal("a failed commit must move the generation on")
	}
	if err := s.Append(gen, Record{Ops: []Op{Put("b", []byte("k"), []byte("v2"))}}).Wait(ctx); !errors.Is(err, ErrStaleGeneration) {
		t.Fatalf("append at the old generation: %v, want ErrStaleGeneration", err)
	}
	failing.Store(false)
	if err := s.Append(s.Gen(), Record{Ops: []Op{Put("b", []byte("k"), []byte("v3"))}}).Wait(ctx); err != nil {
		t.Fatalf("append after the fault cleared: %v", err)
	}
	if v, _ := s.Get("b", []byte("k")); string(v) != "v3" {
		t.Fatalf("got %q, want v3", v)
	}
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("OnFailure was not called")
	}
}

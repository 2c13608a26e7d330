package wire

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentpay/guard/persistence"
	"github.com/agentpay/guard/transport/receipt"
)

// Receipt signing keys belong to the service, not to an owner: one key
// signs every receipt, and /.well-known/jwks.json publishes it with the
// keys it replaced. They are managed on a stopped server's data, as owners
// are made: a running server holds its data directory, and its keyring is
// read once at start, so a rotation takes effect at the next start.

// ErrNoData is returned when the data directory holds no data file, so
// that a mistyped -data is not taken for an empty service.
var ErrNoData = errors.New("no data file")

// RequireData refuses a data directory that holds no data file, for the
// administrative commands: opening it would make an empty one there.
func RequireData(cfg Config) error {
	dataFile := filepath.Join(cfg.Data, JournalFile)
	if _, err := os.Stat(dataFile); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w at %s; give the server's data directory with -data DIR, or its config with -config FILE (nothing was changed)", ErrNoData, dataFile)
	} else if err != nil {
		return err
	}
	return nil
}

// openData opens the journal of a stopped server for an administrative
// change, refusing a data directory that holds no data.
func openData(cfg Config) (*persistence.Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := RequireData(cfg); err != nil {
		return nil, err
	}
	store, err := persistence.Open(persistence.Options{Path: filepath.Join(cfg.Data, JournalFile), JournalDir: cfg.JournalDir,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, fmt.Errorf("opening the journal: %w", err)
	}
	return store, nil
}

// ReceiptKeys lists the receipt signing keys of a stopped server's data:
// the current one first, then the retired ones from newest to oldest.
func ReceiptKeys(cfg Config) ([]receipt.Key, error) {
	store, err := openData(cfg)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	kr, err := readKeyring(store)
	if err != nil {
		return nil, err
	}
	if kr == nil {
		return nil, nil
	}
	return kr.Keys(), nil
}

// RotateReceiptKey retires the current receipt signing key at now and
// makes a new one current, in one durable record. Receipts signed before
// keep verifying: the retired key stays in the JWKS. The chain of an
// owner's receipts goes on across the change (each links the previous
// token, whichever key signed it). It returns the new key and the one it
// retired.
func RotateReceiptKey(cfg Config, now time.Time) (current, retired receipt.Key, err error) {
	store, err := openData(cfg)
	if err != nil {
		return current, retired, err
	}
	defer store.Close()
	kr, err := readKeyring(store)
	if err != nil {
		return current, retired, err
	}
	if kr == nil {
		return current, retired, errors.New("the data holds no receipt key yet; the server makes the first one when it starts (nothing was changed)")
	}
	prev := kr.Current()
	if current, err = kr.Rotate(rand.Reader, now); err != nil {
		return current, retired, err
	}
	for _, k := range kr.Keys() {
		if k.ID == prev.ID {
			retired = k
		}
	}
	var ops []persistence.Op
	for _, k := range []receipt.Key{current, retired} {
		b, err := k.MarshalBinary()
		if err != nil {
			return current, retired, err
		}
		ops = append(ops, persistence.Put(signingKeysBucket, []byte(k.ID), b))
	}
	if err := commitOps(store, ops); err != nil {
		return current, retired, fmt.Errorf("storing the new receipt key: %w", err)
	}
	return current, retired, nil
}

// WithdrawReceiptKey removes a retired receipt signing key from the JWKS,
// for a key that was exposed: receipts it signed no longer verify, so a
// receipt forged with it does not either. The current key cannot be
// withdrawn; rotate first.
func WithdrawReceiptKey(cfg Config, kid string) error {
	store, err := openData(cfg)
	if err != nil {
		return err
	}
	defer store.Close()
	kr, err := readKeyring(store)
	if err != nil {
		return err
	}
	if kr == nil {
		return errors.New("the data holds no receipt key yet (nothing was changed)")
	}
	for _, k := range kr.Keys() {
		if k.ID != kid {
			continue
		}
		if !k.Retired() {
			return fmt.Errorf("%s is the current receipt key, which signs every new receipt; rotate it first (guard receipt-keys rotate), then withdraw it (nothing was changed)", kid)
		}
		return commitOps(store, []persistence.Op{persistence.Del(signingKeysBucket, []byte(kid))})
	}
	return fmt.Errorf("no receipt key %s in this data; guard receipt-keys list shows them (nothing was changed)", kid)
}

// readKeyring reads the stored receipt keys; nil when there are none.
func readKeyring(store *persistence.Store) (*receipt.Keyring, error) {
	var keys []receipt.Key
	var decodeErr error
	err := store.Scan(signingKeysBucket, nil, nil, false, func(_, v []byte) bool {
		k, err := receipt.UnmarshalKey(v)
		if err != nil {
			decodeErr = err
			return false
		}
		keys = append(keys, k)
		return true
	})
	if err == nil {
		err = decodeErr
	}
	if err != nil {
		return nil, fmt.Errorf("reading receipt keys: %w", err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	kr, err := receipt.NewKeyring(keys...)
	if err != nil {
		return nil, errors.Join(errors.New("loading receipt keys"), err)
	}
	return kr, nil
}

// commitOps appends ops as one record and waits until it is durable.
func commitOps(store *persistence.Store, ops []persistence.Op) error {
	t := store.Append(store.Gen(), persistence.Record{Ops: ops})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return t.Wait(ctx)
}

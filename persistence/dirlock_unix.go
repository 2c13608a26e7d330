//go:build unix

package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// journalLockName is the lock file of a journal directory.
const journalLockName = "LOCK"

// lockDir takes an exclusive advisory lock on dir's lock file, held until
// the returned file is closed. bbolt locks its own file, but two data files
// could otherwise be given one journal directory, and each would take the
// other's segments for its own.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, journalLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("journal directory %s is in use by another open store (its %s file is locked); give each data file a journal directory of its own", dir, journalLockName)
		}
		return nil, fmt.Errorf("journal directory %s: lock: %w", dir, err)
	}
	return f, nil
}

//go:build !unix

package persistence

import (
	"os"
	"path/filepath"
)

const journalLockName = "LOCK"

// lockDir only opens dir's lock file where advisory locks are not
// available: nothing stops a second store from sharing the directory.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, journalLockName), os.O_RDWR|os.O_CREATE, 0o600)
}

//go:build unix

package bench

import "syscall"

// openFilesLimit is the most files this process may have open (the soft
// limit, which the Go runtime raises to the hard one as it starts), or 0
// when it cannot be read.
func openFilesLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return uint64(l.Cur)
}

//go:build unix

package bench

import (
	"io"
	"net"
	"os"
	"syscall"
)

// rawConnOf is the connection's descriptor access, for readWhenReady.
func rawConnOf(conn net.Conn) syscall.RawConn {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// readWhenReady waits until raw is readable, then reads into p once. The
// connection's read deadline applies to the wait.
func readWhenReady(raw syscall.RawConn, p []byte) (int, error) {
	var n int
	var rerr error
	waited := false
	err := raw.Read(func(fd uintptr) bool {
		if !waited {
			waited = true
			return false // wait for readability before the first read
		}
		for {
			n, rerr = syscall.Read(int(fd), p)
			if rerr != syscall.EINTR {
				break
			}
		}
		return rerr != syscall.EAGAIN // not ready after all: wait again
	})
	switch {
	case err != nil: // the deadline, or the connection closed
		return 0, err
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", rerr)}
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

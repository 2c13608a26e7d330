//go:build !unix

package bench

import (
	"net"
	"syscall"
)

// rawConnOf returns nil: elsewhere the load generator reads the
// connection the ordinary way.
func rawConnOf(net.Conn) syscall.RawConn { return nil }

func readWhenReady(syscall.RawConn, []byte) (int, error) {
	panic("bench: readWhenReady without a raw connection")
}

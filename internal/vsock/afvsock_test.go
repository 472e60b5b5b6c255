package vsock

import (
	"errors"
	"net"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// SetBufferSize reports what it could not do; AF_VSOCK itself is never
// opened here (/dev/vsock on a development machine is its own channel to
// its hypervisor), so the cases are the refusals.
func TestSetBufferSizeRefusals(t *testing.T) {
	g := NewWithT(t)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	g.Expect(SetBufferSize(a, 1<<20)).To(MatchError(errors.ErrUnsupported), "no socket behind an in-memory pipe")

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	g.Expect(err).NotTo(HaveOccurred())
	c := fileConn(t, fds[0])
	defer unix.Close(fds[1])
	g.Expect(SetBufferSize(c, 1<<20)).To(HaveOccurred(), "a UNIX socket has no AF_VSOCK options")
}

// fileConn wraps the socket fd in a net.Conn (which dups it; fd is closed).
func fileConn(t *testing.T, fd int) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socketpair")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatalf("failed to make a conn of a socketpair end: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

package relay

import (
	"errors"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// spliceCopy moves the bytes of src to dst through a pipe with splice(2)
// when both are AF_UNIX stream sockets (the UNIX-socket vsock emulation and
// a vhost-user vsock backend's host side): the kernel passes the socket
// buffers' pages to the pipe and on to the other socket (MSG_SPLICE_PAGES,
// Linux 6.5+) instead of copying every byte into the relay and out again,
// and one splice pair replaces a read and a write of up to pipeSize bytes.
// Go's io.Copy does not splice between two UNIX sockets. It returns
// ok=false, having moved nothing, when either end is not an AF_UNIX socket
// (AF_VSOCK has no splice_read of its own, so a splice would copy anyway)
// or no pipe can be made; the caller then copies with a buffer. Otherwise
// rerr is src's error (io.EOF at its end) and werr dst's; moved receives
// the size of every chunk written.
func spliceCopy(dst, src net.Conn, pipeSize int, moved func(int)) (ok bool, rerr, werr error) {
	srcRC, okS := rawConn(src)
	dstRC, okD := rawConn(dst)
	if !okS || !okD || !isUnixStream(srcRC) || !isUnixStream(dstRC) {
		return false, nil, nil
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return false, nil, nil
	}
	pr, pw := p[0], p[1]
	defer unix.Close(pr)
	defer unix.Close(pw)
	// The pipe holds at most pipeSize bytes (rounded to pages by the
	// kernel; capped by fs.pipe-max-size, so a failure keeps the default).
	if size, err := unix.FcntlInt(uintptr(pw), unix.F_SETPIPE_SZ, pipeSize); err == nil && size > 0 {
		pipeSize = size
	}
	const flags = unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK
	for {
		var n int64
		var serr error
		err := srcRC.Read(func(fd uintptr) bool {
			n, serr = unix.Splice(int(fd), nil, pw, nil, pipeSize, flags)
			return !errors.Is(serr, unix.EAGAIN) // wait until src is readable
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return true, err, nil
		}
		if n == 0 {
			return true, io.EOF, nil
		}
		for left := n; left > 0; {
			var m int64
			var werr error
			err := dstRC.Write(func(fd uintptr) bool {
				m, werr = unix.Splice(pr, nil, int(fd), nil, int(left), flags)
				return !errors.Is(werr, unix.EAGAIN) // wait until dst is writable
			})
			if err == nil {
				err = werr
			}
			if err != nil {
				return true, nil, err
			}
			left -= m
			moved(int(m))
		}
	}
}

func rawConn(c net.Conn) (syscall.RawConn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	return rc, err == nil
}

// isUnixStream reports whether the socket behind rc is AF_UNIX SOCK_STREAM.
func isUnixStream(rc syscall.RawConn) bool {
	var ok bool
	_ = rc.Control(func(fd uintptr) {
		sa, err := unix.Getsockname(int(fd))
		if _, unixSock := sa.(*unix.SockaddrUnix); err != nil || !unixSock {
			return
		}
		typ, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		ok = err == nil && typ == unix.SOCK_STREAM
	})
	return ok
}

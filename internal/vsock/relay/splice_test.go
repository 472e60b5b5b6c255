package relay

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// unixPair returns the two ends of a connected AF_UNIX stream.
func unixPair(t *testing.T) (a, b *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.UnixConn, 1)
	go func() { c, _ := ln.AcceptUnix(); accepted <- c }()
	a, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	b = <-accepted
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// Between two UNIX sockets every byte arrives in order through the pipe,
// src's EOF comes back as io.EOF and moved counts every byte.
func TestSpliceCopyBetweenUnixSockets(t *testing.T) {
	g := NewWithT(t)
	client, srcEnd := unixPair(t)
	dstEnd, server := unixPair(t)
	payload := make([]byte, 3<<20+123) // more than one pipe-full, not a multiple of it
	_, _ = rand.Read(payload)

	type result struct {
		ok         bool
		rerr, werr error
		moved      int
	}
	done := make(chan result, 1)
	go func() {
		var moved int
		ok, rerr, werr := spliceCopy(dstEnd, srcEnd, 64<<10, func(n int) { moved += n })
		done <- result{ok, rerr, werr, moved}
	}()
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(io.LimitReader(server, int64(len(payload)))); got <- b }()
	_, err := client.Write(payload)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(client.CloseWrite()).To(Succeed())

	var r result
	g.Eventually(done, 20*time.Second).Should(Receive(&r))
	g.Expect(r.ok).To(BeTrue(), "both ends are AF_UNIX streams")
	g.Expect(r.rerr).To(MatchError(io.EOF))
	g.Expect(r.werr).NotTo(HaveOccurred())
	g.Expect(r.moved).To(Equal(len(payload)))
	var b []byte
	g.Eventually(got, 20*time.Second).Should(Receive(&b))
	g.Expect(bytes.Equal(b, payload)).To(BeTrue(), "payload arrives unchanged and in order")
}

// A write end that fails (its peer closed) is reported as werr.
func TestSpliceCopyReportsWriteError(t *testing.T) {
	g := NewWithT(t)
	client, srcEnd := unixPair(t)
	dstEnd, server := unixPair(t)
	g.Expect(server.Close()).To(Succeed())
	done := make(chan error, 1)
	go func() {
		_, _, werr := spliceCopy(dstEnd, srcEnd, 64<<10, func(int) {})
		done <- werr
	}()
	// One chunk: splicing it into a socket whose peer is gone fails (EPIPE).
	_, err := client.Write(make([]byte, 1024))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(done, 10*time.Second).Should(Receive(HaveOccurred()))
}

// Anything but two AF_UNIX sockets (here an in-memory net.Pipe) is left to
// the buffered copy: ok is false and nothing was read.
func TestSpliceCopyDeclinesOtherConns(t *testing.T) {
	g := NewWithT(t)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_, u := unixPair(t)
	ok, rerr, werr := spliceCopy(u, a, 64<<10, func(int) {})
	g.Expect(ok).To(BeFalse())
	g.Expect(rerr).NotTo(HaveOccurred())
	g.Expect(werr).NotTo(HaveOccurred())
}

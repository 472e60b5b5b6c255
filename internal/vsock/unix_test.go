package vsock_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	mdvsock "github.com/mdlayher/vsock"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// accept runs ln.Accept in the background and returns a channel with its
// outcome.
func accept(ln net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	return ch
}

func TestUnixTransportAddressesAndPayload(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	server := vsock.NewUnixTransport(root, 7)
	client := vsock.NewUnixTransport(root, 3)

	ln, err := server.Listen(1234)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ln.Close() })
	g.Expect(ln.Addr()).To(Equal(&vsock.Addr{CID: 7, Port: 1234}))
	g.Expect(filepath.Join(root, "7", "1234.sock")).To(BeAnExistingFile())

	accepted := accept(ln)
	c, err := client.Dial(context.Background(), 7, 1234)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	var s net.Conn
	g.Eventually(accepted).Should(Receive(&s))
	t.Cleanup(func() { _ = s.Close() })

	// The accepted side learns the dialer's CID and ephemeral port from the
	// preamble; the dialing side reports its own CID and the target.
	peer, err := vsock.PeerAddr(s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peer.CID).To(Equal(uint32(3)))
	g.Expect(c.LocalAddr()).To(Equal(&vsock.Addr{CID: 3, Port: peer.Port}))
	g.Expect(peer.Port).To(BeNumerically(">=", 1024))
	g.Expect(c.RemoteAddr()).To(Equal(&vsock.Addr{CID: 7, Port: 1234}))
	g.Expect(s.LocalAddr()).To(Equal(&vsock.Addr{CID: 7, Port: 1234}))
	cid, err := vsock.PeerCID(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cid).To(Equal(uint32(7)))

	// A second dial gets a different ephemeral port.
	accepted = accept(ln)
	c2, err := client.Dial(context.Background(), 7, 1234)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c2.Close() })
	var s2 net.Conn
	g.Eventually(accepted).Should(Receive(&s2))
	t.Cleanup(func() { _ = s2.Close() })
	peer2, err := vsock.PeerAddr(s2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peer2.Port).NotTo(Equal(peer.Port))

	// Payload sent right after the preamble arrives intact both ways (the
	// preamble readers must not swallow it).
	go func() { _, _ = s.Write([]byte("from-server\n")) }()
	line, err := bufio.NewReader(c).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("from-server\n"))
	go func() { _, _ = c.Write([]byte("from-client\n")) }()
	line, err = bufio.NewReader(s).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(line).To(Equal("from-client\n"))
}

func TestUnixTransportHalfClose(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	ln, err := vsock.NewUnixTransport(root, 5).Listen(80)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ln.Close() })

	accepted := accept(ln)
	c, err := vsock.NewUnixTransport(root, 3).Dial(context.Background(), 5, 80)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close() })
	var s net.Conn
	g.Eventually(accepted).Should(Receive(&s))
	t.Cleanup(func() { _ = s.Close() })

	_, err = c.Write([]byte("request"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vsock.CloseWrite(c)).To(Succeed())

	req, err := io.ReadAll(s) // ends at the client's EOF
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(req)).To(Equal("request"))
	_, err = s.Write([]byte("reply"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Close()).To(Succeed())

	reply, err := io.ReadAll(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(reply)).To(Equal("reply"))
}

func TestUnixTransportErrors(t *testing.T) {
	t.Run("no listener", func(t *testing.T) {
		g := NewWithT(t)
		_, err := vsock.NewUnixTransport(t.TempDir(), 3).Dial(context.Background(), 9, 1)
		g.Expect(err).To(MatchError(os.ErrNotExist))
	})

	t.Run("port 0", func(t *testing.T) {
		g := NewWithT(t)
		_, err := vsock.NewUnixTransport(t.TempDir(), 3).Listen(0)
		g.Expect(err).To(MatchError(ContainSubstring("port 0")))
	})

	t.Run("live listener keeps its port, a stale socket is replaced", func(t *testing.T) {
		g := NewWithT(t)
		tr := vsock.NewUnixTransport(t.TempDir(), 4)
		ln, err := tr.Listen(10)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = ln.Close() })
		_, err = tr.Listen(10)
		g.Expect(err).To(MatchError(syscall.EADDRINUSE))

		// A socket file without a listener, as a killed process leaves it.
		stale := tr.SocketPath(4, 11)
		raw, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
		g.Expect(err).NotTo(HaveOccurred())
		raw.SetUnlinkOnClose(false)
		g.Expect(raw.Close()).To(Succeed())
		g.Expect(stale).To(BeAnExistingFile())
		ln2, err := tr.Listen(11)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ln2.Close()).To(Succeed())
	})

	t.Run("close stops accept and removes the socket", func(t *testing.T) {
		g := NewWithT(t)
		tr := vsock.NewUnixTransport(t.TempDir(), 4)
		ln, err := tr.Listen(12)
		g.Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { _, err := ln.Accept(); done <- err }()
		g.Expect(ln.Close()).To(Succeed())
		g.Eventually(done).Should(Receive(MatchError(net.ErrClosed)))
		g.Expect(tr.SocketPath(4, 12)).NotTo(BeAnExistingFile())
	})

	t.Run("malformed preamble is answered with ERR and not accepted", func(t *testing.T) {
		g := NewWithT(t)
		tr := vsock.NewUnixTransport(t.TempDir(), 4)
		ln, err := tr.Listen(13)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = ln.Close() })
		accepted := accept(ln)

		raw, err := net.Dial("unix", tr.SocketPath(4, 13))
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = raw.Close() })
		_, err = raw.Write([]byte("HELLO 3\n"))
		g.Expect(err).NotTo(HaveOccurred())
		reply, err := io.ReadAll(raw)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(reply)).To(HavePrefix("ERR "))
		g.Consistently(accepted, 100*time.Millisecond).ShouldNot(Receive())
	})

	t.Run("dial gives up when its context ends during the preamble", func(t *testing.T) {
		g := NewWithT(t)
		tr := vsock.NewUnixTransport(t.TempDir(), 3)
		// Only the context can end this dial: the handshake timeout is an hour.
		tr.HandshakeTimeout = time.Hour
		// A raw UNIX listener that accepts and reads the preamble but never
		// answers it.
		path := tr.SocketPath(6, 14)
		g.Expect(os.MkdirAll(filepath.Dir(path), 0o755)).To(Succeed())
		mute, err := net.Listen("unix", path)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = mute.Close() })
		preamble := make(chan string, 1)
		go func() {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			line, _ := r.ReadString('\n')
			preamble <- line
			_, _ = io.Copy(io.Discard, r) // until the dialer closes
		}()

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		dialed := make(chan error, 1)
		go func() {
			_, err := tr.Dial(ctx, 6, 14)
			dialed <- err
		}()
		// The dialer has sent its preamble and waits for the reply: end the
		// context then.
		g.Eventually(preamble, 30*time.Second).Should(Receive(HavePrefix("CONNECT 3 ")))
		cancel()
		// A hang guard, not a speed target: a dial that ignored its context
		// would wait the hour.
		g.Eventually(dialed, time.Minute).Should(Receive(&err))
		g.Expect(err).To(MatchError(context.Canceled))
	})
}

// fakeConn is a net.Conn whose only behaviour is its RemoteAddr.
type fakeConn struct {
	net.Conn
	remote net.Addr
}

func (f fakeConn) RemoteAddr() net.Addr { return f.remote }

func TestPeerAddrAndCloseWrite(t *testing.T) {
	tests := []struct {
		name       string
		remote     net.Addr
		want       vsock.Addr
		wantString string
		wantErr    error
	}{
		{name: "emulated", remote: &vsock.Addr{CID: 12, Port: 1025}, want: vsock.Addr{CID: 12, Port: 1025}, wantString: "12:1025"},
		// What AFVSockTransport's accepted connections report (no socket is
		// opened here).
		{name: "AF_VSOCK", remote: &mdvsock.Addr{ContextID: 42, Port: 2000}, want: vsock.Addr{CID: 42, Port: 2000}, wantString: "42:2000"},
		{name: "TCP", remote: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, wantErr: vsock.ErrNotVsock},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := vsock.PeerAddr(fakeConn{remote: tt.remote})
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(got.String()).To(Equal(tt.wantString))
		})
	}

	t.Run("CloseWrite without half-close support", func(t *testing.T) {
		g := NewWithT(t)
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		g.Expect(errors.Is(vsock.CloseWrite(a), vsock.ErrNoHalfClose)).To(BeTrue())
	})
}

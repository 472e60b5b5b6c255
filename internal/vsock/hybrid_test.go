package vsock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// fakeBackend plays vhost-device-vsock's host side for guest cid, byte for
// byte as its source (v0.3.0, vhu_vsock_thread.rs and vsock_conn.rs) does:
// on <uds> it reads "CONNECT <port>\n" and answers "OK <local port>\n" when
// the guest listens on port (here: the ports in listening), else closes;
// dialHost plays a guest dialing CID 2: it connects to "<uds>_<port>".
type fakeBackend struct {
	uds       string
	listening map[uint32]bool
	ln        net.Listener
}

func startFakeBackend(t *testing.T, tr *vsock.UnixTransport, cid uint32, ports ...uint32) *fakeBackend {
	b := &fakeBackend{uds: tr.HybridPath(cid), listening: map[uint32]bool{}}
	for _, p := range ports {
		b.listening[p] = true
	}
	ln, err := net.Listen("unix", b.uds)
	if err != nil {
		t.Fatal(err)
	}
	b.ln = ln
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	return b
}

func (b *fakeBackend) serve(c net.Conn) {
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		_ = c.Close()
		return
	}
	var port uint32
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "CONNECT %d", &port); err != nil || !b.listening[port] {
		_ = c.Close() // the guest answered RST
		return
	}
	fmt.Fprintf(c, "OK %d\n", 1024)
	// The guest service echoes in upper case.
	data, _ := io.ReadAll(r)
	_, _ = c.Write([]byte(strings.ToUpper(string(data))))
	_ = c.Close()
}

func (b *fakeBackend) dialHost(port uint32) (net.Conn, error) {
	return net.Dial("unix", fmt.Sprintf("%s_%d", b.uds, port))
}

func TestHybridHostDialsARealGuest(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	host := vsock.NewUnixTransport(root, vsock.HostCID)
	startFakeBackend(t, host, 7, 5432)

	c, err := host.Dial(context.Background(), 7, 5432)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.RemoteAddr().String()).To(Equal("7:5432"))
	g.Expect(c.LocalAddr().String()).To(Equal("2:1024"))
	_, err = c.Write([]byte("hello"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vsock.CloseWrite(c)).To(Succeed())
	got, err := io.ReadAll(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(got)).To(Equal("HELLO"))

	_, err = host.Dial(context.Background(), 7, 9999)
	g.Expect(err).To(MatchError(ContainSubstring("nothing listens on port 9999")))
}

func TestHybridHostListenerAcceptsRealGuests(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	host := vsock.NewUnixTransport(root, vsock.HostCID)
	ln, err := host.Listen(7000)
	g.Expect(err).NotTo(HaveOccurred())
	// A guest that starts after the listener is picked up by the rescan.
	b := startFakeBackend(t, host, 9)
	var c net.Conn
	g.Eventually(func() error { c, err = b.dialHost(7000); return err }, 2*time.Second, 20*time.Millisecond).Should(Succeed())
	defer c.Close()
	acc, err := ln.Accept()
	g.Expect(err).NotTo(HaveOccurred())
	cid, err := vsock.PeerCID(acc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cid).To(Equal(uint32(9)), "the guest's CID comes from the socket path")
	_, err = c.Write([]byte("x"))
	g.Expect(err).NotTo(HaveOccurred())
	buf := make([]byte, 1)
	_, err = io.ReadFull(acc, buf)
	g.Expect(err).NotTo(HaveOccurred())
	_ = acc.Close()

	// The guest goes away: its listener socket goes too; Close removes the rest.
	_ = b.ln.Close()
	g.Eventually(func() bool { _, err := os.Stat(b.uds + "_7000"); return os.IsNotExist(err) }, 2*time.Second).Should(BeTrue())
	b2 := startFakeBackend(t, host, 10)
	g.Eventually(func() error { _, err := os.Stat(b2.uds + "_7000"); return err }, 2*time.Second).Should(Succeed())
	g.Expect(ln.Close()).To(Succeed())
	left, _ := filepath.Glob(filepath.Join(root, "*_7000"))
	g.Expect(left).To(BeEmpty())
}

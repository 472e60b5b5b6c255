package plugin_test

import (
	"errors"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/internal/cnitest"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// testTraffic wires two namespaces through the bridge and moves TCP data
// between them at MTU 9000, plus a don't-fragment ping of a full 9000-byte
// IP packet.
func testTraffic(t *testing.T, datapath string) {
	g := NewWithT(t)
	e := newEnv(t, datapath, "1.0.0")
	ns1, ns2 := cnitest.NewNS(t), cnitest.NewNS(t)
	a1 := e.mustAdd(ns1, e.conf(cnitest.Conf{}))
	a2 := e.mustAdd(ns2, e.conf(cnitest.Conf{}))
	t.Cleanup(func() {
		_ = e.del(a1, ns1.Path())
		_ = e.del(a2, ns2.Path())
	})

	out, err := exec.Command("nsenter", "--net="+ns1.Path(), "/bin/ping", "-c", "3", "-i", "0.2", "-W", "5", "-M", "do", "-s", "8972", a2.ip()).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("8980 bytes from " + a2.ip()))

	// Listener and dialer sockets belong to the namespace they are created in.
	var ln net.Listener
	g.Expect(ns2.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp4", net.JoinHostPort(a2.ip(), "0"))
		return err
	})).To(Succeed())
	defer ln.Close()
	received := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- -1
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		n, _ := io.Copy(io.Discard, c)
		received <- n
	}()
	var conn net.Conn
	g.Expect(ns1.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 10*time.Second)
		return err
	})).To(Succeed())
	const size = 64 << 20
	g.Expect(conn.SetDeadline(time.Now().Add(time.Minute))).To(Succeed())
	n, err := io.CopyN(conn, zeroReader{}, size)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(BeEquivalentTo(size))
	raw, err := conn.(*net.TCPConn).SyscallConn()
	g.Expect(err).NotTo(HaveOccurred())
	var mss int
	g.Expect(raw.Control(func(fd uintptr) { mss, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_MAXSEG) })).To(Succeed())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mss).To(BeNumerically(">", 8900), "segments sized for MTU 9000 (9000 - 40 header bytes - options)")
	g.Expect(conn.Close()).To(Succeed())
	g.Eventually(received, time.Minute).Should(Receive(BeEquivalentTo(size)))
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// testDelWaitsForOVSDB: a DEL that reports success is not called again and
// no runtime is bound to call GC, so DEL must not leave the OVS port behind
// when OVSDB does not answer at once (ovsdb-server restarting, or too busy
// to accept, as on a loaded node): it tries again and removes the port. The
// attachment's recorded OVSDB endpoint is pointed at a socket that refuses
// the first connection and forwards the next ones to the shared Open
// vSwitch (ovsdbAfterRefusal). (A DEL whose OVSDB never answers fails with
// code 11 and keeps the record: TestTeardownWaitsForOVSDB.)
func testDelWaitsForOVSDB(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathOVS, "1.1.0")
	netns := cnitest.NewNS(t)
	a := e.mustAdd(netns, e.conf(cnitest.Conf{}))
	store, err := state.New(e.stateDir)
	g.Expect(err).NotTo(HaveOccurred())
	rec, err := store.Load(a.containerID, "net1")
	g.Expect(err).NotTo(HaveOccurred())
	endpoint, refused := ovsdbAfterRefusal(t, e.br.OVSSocket)
	rec.OVSSocket = endpoint
	g.Expect(store.Save(rec)).To(Succeed())

	g.Expect(e.del(a, netns.Path())).To(Succeed())
	g.Expect(refused).To(BeClosed(), "the DEL's first connection was refused")
	e.expectGone(g, a, true)
	e.expectNothingLeft(g, netns)
}

// ovsdbAfterRefusal serves a Unix socket of its own that closes the first
// connection at once, as an ovsdb-server that cannot take it does, and
// forwards every later one to OVSDB at target (unix:<path>). It returns the
// socket as an OVSDB endpoint and a channel closed once it refused; it
// stops at the end of the test.
func ovsdbAfterRefusal(t *testing.T, target string) (endpoint string, refused <-chan struct{}) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("failed to listen on %s: %v", path, err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for first := true; ; first = false {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if first {
				c.Close()
				close(done)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				forward(c, strings.TrimPrefix(target, "unix:"))
			}()
		}
	}()
	return "unix:" + path, done
}

// forward copies between c and a new connection to the Unix socket path
// until either side ends, then closes both.
func forward(c net.Conn, path string) {
	defer c.Close()
	up, err := net.Dial("unix", path)
	if err != nil {
		return
	}
	defer up.Close()
	ended := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); ended <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); ended <- struct{}{} }()
	<-ended
}

// testRefusesOffloadsWithoutUserspaceTSO: on a netdev bridge whose
// Open_vSwitch row lacks userspace-tso-enable=true, ADD refuses offloads that
// would stall TCP and accepts them all off.
func testRefusesOffloadsWithoutUserspaceTSO(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, netconf.DatapathOVS, "1.0.0")
	vsctl := func(args ...string) string {
		out, err := exec.Command("ovs-vsctl", append([]string{"--db=" + e.br.OVSSocket}, args...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return strings.TrimSpace(string(out))
	}
	before := vsctl("--if-exists", "get", "Open_vSwitch", ".", "other_config:userspace-tso-enable")
	vsctl("remove", "Open_vSwitch", ".", "other_config", "userspace-tso-enable")
	t.Cleanup(func() {
		if before != "" {
			vsctl("set", "Open_vSwitch", ".", "other_config:userspace-tso-enable="+before)
		}
	})

	netns := cnitest.NewNS(t)
	_, err := e.add(netns, e.conf(cnitest.Conf{}), "")
	var cniErr *types.Error
	g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
	g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrInvalidNetworkConfig))
	g.Expect(cniErr.Msg).To(ContainSubstring("OVS bridge " + e.br.Name + " uses the userspace datapath (datapath_type=netdev) without Open_vSwitch other_config:userspace-tso-enable=true"))
	e.expectNothingLeft(g, netns)

	off := map[string]bool{"tso": false, "gso": true, "gro": false, "txChecksum": false}
	a, err := e.add(netns, e.conf(cnitest.Conf{Offloads: off}), "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.del(a, netns.Path())).To(Succeed())
	e.expectNothingLeft(g, netns)
}

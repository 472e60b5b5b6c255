package netperf_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/netperf"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// startNetserver starts a netserver on a free loopback port (in netnsPath
// when set) and stops it when the test ends.
func startNetserver(t *testing.T, netnsPath string) *netperf.Netserver {
	t.Helper()
	n, err := netperf.StartNetserver(context.Background(), netperf.NetserverOptions{Addr: "127.0.0.1", NetNS: netnsPath})
	if err != nil {
		t.Fatalf("failed to start netserver: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("failed to stop netserver: %v", err)
		}
	})
	return n
}

func TestCommandMatchesCapturedCommands(t *testing.T) {
	for _, tc := range []struct {
		capture string
		spec    netperf.Spec
	}{
		{"tcp_stream_256k_64k", netperf.Spec{Host: "10.199.0.2", Port: 22865, Test: results.TCPStream, Duration: time.Second, SocketBytes: 262144, MessageBytes: 65536}},
		{"tcp_stream_default_sock", netperf.Spec{Host: "10.199.0.2", Port: 22865, Test: results.TCPStream, Duration: time.Second, MessageBytes: 16384}},
		{"tcp_rr_1", netperf.Spec{Host: "10.199.0.2", Port: 22865, Test: results.TCPRR, Duration: time.Second, SocketBytes: 262144, MessageBytes: 1}},
		{"tcp_maerts_256k_64k", netperf.Spec{Host: "10.199.0.2", Port: 22865, Test: results.TCPMaerts, Duration: time.Second, SocketBytes: 262144, MessageBytes: 65536}},
		{"udp_stream_1472", netperf.Spec{Host: "10.199.0.2", Port: 22865, Test: results.UDPStream, Duration: time.Second, SocketBytes: 262144, MessageBytes: 1472}},
		{"tcp_crr_1", netperf.Spec{Host: "10.199.0.2", Port: 22865, Test: results.TCPCRR, Duration: time.Second, MessageBytes: 1}},
	} {
		t.Run(tc.capture, func(t *testing.T) {
			g := gomega.NewWithT(t)
			argv, err := tc.spec.Command()
			g.Expect(err).NotTo(gomega.HaveOccurred())
			// The capture ran the client in a namespace: "ip netns exec NAME netperf ...".
			cmd := loadCapture(t, tc.capture).cmd
			g.Expect(cmd[:3]).To(gomega.Equal([]string{"ip", "netns", "exec"}))
			g.Expect(argv).To(gomega.Equal(cmd[4:]))
		})
	}
}

func TestCommandDefaults(t *testing.T) {
	g := gomega.NewWithT(t)
	spec := netperf.Spec{Host: "fd00::2", Test: results.TCPStream, Duration: 60 * time.Second, MessageBytes: 512}
	argv, err := spec.Command()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(strings.Join(argv, " ")).To(gomega.Equal("netperf -H fd00::2 -t TCP_STREAM -l 60 -f m -P 0 -c -C -- -m 512 -o " + strings.Join(netperf.StreamSelectors, ",")))
	g.Expect(spec.Endpoint()).To(gomega.Equal("[fd00::2]:12865"))

	// Pinned: -T client,server before the test.
	spec.CPUs = &netperf.CPUPair{Client: 0, Server: 1}
	argv, err = spec.Command()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(strings.Join(argv[:9], " ")).To(gomega.Equal("netperf -H fd00::2 -T 0,1 -t TCP_STREAM -l 60"))
}

func TestParseCPUPair(t *testing.T) {
	g := gomega.NewWithT(t)
	p, err := netperf.ParseCPUPair("0,1")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(*p).To(gomega.Equal(netperf.CPUPair{Client: 0, Server: 1}))
	p, err = netperf.ParseCPUPair("")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(p).To(gomega.BeNil())
	for _, bad := range []string{"0", "a,1", "0,-1", "0,1,2"} {
		_, err := netperf.ParseCPUPair(bad)
		g.Expect(err).To(gomega.HaveOccurred(), bad)
	}
}

func TestSpecValidate(t *testing.T) {
	ok := netperf.Spec{Host: "10.0.0.2", Test: results.TCPStream, Duration: time.Second, MessageBytes: 1}
	for name, tc := range map[string]struct {
		mutate  func(*netperf.Spec)
		message string
	}{
		"no host":         {func(s *netperf.Spec) { s.Host = "" }, "must be a name or address"},
		"host is a flag":  {func(s *netperf.Spec) { s.Host = "-V" }, "must be a name or address"},
		"bad port":        {func(s *netperf.Spec) { s.Port = 70000 }, "out of range"},
		"sub-second":      {func(s *netperf.Spec) { s.Duration = 500 * time.Millisecond }, "whole seconds"},
		"fractional":      {func(s *netperf.Spec) { s.Duration = 1500 * time.Millisecond }, "whole seconds"},
		"negative socket": {func(s *netperf.Spec) { s.SocketBytes = -1 }, "must not be negative"},
		"no message":      {func(s *netperf.Spec) { s.MessageBytes = 0 }, "at least 1"},
		"vsock test":      {func(s *netperf.Spec) { s.Test = results.VSockStream }, "supported are TCP_STREAM"},
		"negative CPU":    {func(s *netperf.Spec) { s.CPUs = &netperf.CPUPair{Client: -1} }, "must not be negative"},
	} {
		t.Run(name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			s := ok
			tc.mutate(&s)
			_, err := s.Command()
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.message)))
		})
	}
	g := gomega.NewWithT(t)
	g.Expect(ok.Validate()).To(gomega.Succeed())
}

// ShellJoin must survive a real shell unchanged.
func TestShellJoinRoundTripsThroughSh(t *testing.T) {
	g := gomega.NewWithT(t)
	words := []string{"printf", `%s\n`, "a b", "it's", "$HOME", "", "-o", "THROUGHPUT,P99_LATENCY", "`x`", `"q"`}
	stdout, _, err := netperf.Prefix{Argv: []string{"sh", "-c"}, Quote: true}.Run(context.Background(), words)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(stdout)).To(gomega.Equal(strings.Join(words[2:], "\n") + "\n"))
}

func TestSSHPrefix(t *testing.T) {
	g := gomega.NewWithT(t)
	p := netperf.SSH("fedora", netip.MustParseAddr("10.0.2.2"), "-i", "/keys/id")
	g.Expect(p.Argv).To(gomega.Equal([]string{"ssh", "-o", "BatchMode=yes", "-i", "/keys/id", "-l", "fedora", "--", "10.0.2.2"}))
	g.Expect(p.Quote).To(gomega.BeTrue())
	g.Expect(p.String()).To(gomega.Equal("ssh fedora@10.0.2.2"))
	p6 := netperf.SSH("fedora", netip.MustParseAddr("fd00::2"))
	g.Expect(p6.Argv[len(p6.Argv)-2:]).To(gomega.Equal([]string{"--", "fd00::2"}))
	g.Expect(p6.String()).To(gomega.Equal("ssh fedora@[fd00::2]"))
}

// The real OpenSSH client, given a user that spells an option, runs no
// ProxyCommand: -l takes the user as its argument and "--" ends the options
// before the host and the command. The same user in the old argv form
// (user@host before "--") does run it, which shows the test can fail. Port
// 1 on the loopback has no sshd, so nothing logs in either way.
func TestSSHUserNeverBecomesAnOption(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no OpenSSH client")
	}
	opts := []string{"-p", "1", "-o", "ConnectTimeout=2", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-F", "/dev/null"}
	for _, tc := range []struct {
		name    string
		argv    func(user string) []string
		proxied bool
	}{
		{"netperf.SSH", func(user string) []string {
			return netperf.SSH(user, netip.MustParseAddr("127.0.0.1"), opts...).Argv
		}, false},
		{"the old user@host form", func(user string) []string {
			return append(append([]string{"ssh", "-o", "BatchMode=yes"}, opts...), user+"@127.0.0.1", "--")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			dir := t.TempDir()
			user := "-oProxyCommand=touch " + filepath.Join(dir, "pwned")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, _, err := netperf.Prefix{Argv: tc.argv(user), Quote: true}.Run(ctx, []string{"true"})
			g.Expect(err).To(gomega.HaveOccurred(), "nothing listens on port 1")
			entries, rerr := os.ReadDir(dir)
			g.Expect(rerr).NotTo(gomega.HaveOccurred())
			if tc.proxied {
				g.Expect(entries).NotTo(gomega.BeEmpty(), "the old form should have run the ProxyCommand")
			} else {
				g.Expect(entries).To(gomega.BeEmpty(), "ssh ran the user name as a ProxyCommand")
			}
		})
	}
}

func TestRunAgainstLoopbackNetserver(t *testing.T) {
	ns := startNetserver(t, "")
	for _, tc := range []struct {
		test   string
		socket int
		msg    int
	}{
		{results.TCPStream, 65536, 4096},
		{results.TCPMaerts, 65536, 4096},
		{results.UDPStream, 65536, 1472},
		{results.TCPRR, 0, 1},
		{results.TCPCRR, 0, 1},
	} {
		t.Run(tc.test, func(t *testing.T) {
			g := gomega.NewWithT(t)
			spec := netperf.Spec{Host: ns.Addr, Port: ns.Port, Test: tc.test, Duration: time.Second, SocketBytes: tc.socket, MessageBytes: tc.msg, SameHost: true}
			res, err := netperf.Run(context.Background(), netperf.Local{}, spec)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(res.ThroughputMbps).To(gomega.BeNumerically(">", 0))
			// One host: the CPU figure is host-wide and reported once.
			g.Expect(res.CPUScope).To(gomega.Equal(results.CPUScopeHost))
			g.Expect(res.LocalCPUUtilPercent).To(gomega.BeNumerically(">", 0))
			g.Expect(res.ServiceDemandUsPerKB()).To(gomega.Equal(res.LocalServiceDemandUsPerKB))
			g.Expect(res.Session(1, 1, ns.Endpoint()).RemoteCPUUtilPercent).To(gomega.BeZero())
			if tc.test == results.UDPStream {
				g.Expect(res.MessagesSent).To(gomega.BeNumerically(">", 0))
				g.Expect(res.LossPercent()).To(gomega.BeNumerically("<=", 100))
				g.Expect(res.MSSBytes).To(gomega.BeZero())
				return
			}
			g.Expect(res.ElapsedSec).To(gomega.BeNumerically("~", 1, 0.5))
			g.Expect(res.MSSBytes).To(gomega.BeNumerically(">", 0))
			if tc.socket > 0 {
				// Linux doubles what setsockopt(SO_SNDBUF) asks for.
				g.Expect(res.LocalSocketBytes).To(gomega.Equal(2 * tc.socket))
			}
			if results.IsRR(tc.test) {
				g.Expect(res.TransactionsPerSec).To(gomega.BeNumerically(">", 0))
				g.Expect(res.MeanLatencyUs).To(gomega.BeNumerically(">", 0))
				g.Expect(res.P99LatencyUs).To(gomega.BeNumerically(">=", res.MeanLatencyUs*0.5))
				g.Expect(res.RequestBytes).To(gomega.Equal(1))
			} else {
				g.Expect(res.TransactionsPerSec).To(gomega.BeZero())
			}
		})
	}
}

// freeLoopbackPort returns a port nothing listens on.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("failed to find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestRunFailuresNameEndpointAndCommand(t *testing.T) {
	port := freeLoopbackPort(t)
	spec := netperf.Spec{Host: "127.0.0.1", Port: port, Test: results.TCPStream, Duration: time.Second, MessageBytes: 4096}
	for _, tc := range []struct {
		name    string
		ex      netperf.Executor
		mutate  func(*netperf.Spec)
		want    error
		message string
	}{
		{"no netserver", netperf.Local{}, func(*netperf.Spec) {}, netperf.ErrNetserverUnreachable, "are you sure there is a netserver listening"},
		{"unresolvable host", netperf.Local{}, func(s *netperf.Spec) { s.Host = "no-such-host.invalid" }, netperf.ErrHostUnresolvable, "could not resolve host"},
		{"netperf missing locally", netperf.Local{}, func(s *netperf.Spec) { s.Binary = "/nonexistent/netperf" }, netperf.ErrNetperfMissing, "no such file or directory"},
		{"netperf missing behind a shell", netperf.Prefix{Name: "sh", Argv: []string{"sh", "-c"}, Quote: true}, func(s *netperf.Spec) { s.Binary = "no-such-netperf" }, netperf.ErrNetperfMissing, "not found"},
		{"netperf missing behind ip netns exec", netperf.Prefix{Name: "ip-netns", Argv: []string{"sh", "-c", `echo 'exec of "no-such-netperf" failed: No such file or directory' >&2; exit 1`, "sh"}}, func(*netperf.Spec) {}, netperf.ErrNetperfMissing, "exec of"},
		{"killed by SIGPIPE", netperf.Prefix{Argv: []string{"sh", "-c", "kill -PIPE $$", "sh"}}, func(*netperf.Spec) {}, netperf.ErrConnectionLost, "SIGPIPE"},
		{"unknown failure", netperf.Prefix{Argv: []string{"sh", "-c", "echo something odd; exit 3", "sh"}}, func(*netperf.Spec) {}, netperf.ErrFailed, "something odd"},
		{"garbage with exit 0", netperf.Prefix{Argv: []string{"sh", "-c", "echo 1,2,3", "sh"}}, func(*netperf.Spec) {}, netperf.ErrUnparsable, `got 3 in "1,2,3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			s := spec
			tc.mutate(&s)
			res, err := netperf.Run(context.Background(), tc.ex, s)
			t.Log(err)
			g.Expect(res).To(gomega.BeZero())
			g.Expect(err).To(gomega.MatchError(tc.want))
			var re *netperf.RunError
			g.Expect(errors.As(err, &re)).To(gomega.BeTrue())
			g.Expect(re.Endpoint).To(gomega.Equal(s.Endpoint()))
			g.Expect(err.Error()).To(gomega.ContainSubstring("failed to run netperf against " + s.Endpoint() + " via " + tc.ex.String()))
			g.Expect(err.Error()).To(gomega.ContainSubstring(" -t TCP_STREAM -l 1 "))
			g.Expect(strings.ToLower(err.Error())).To(gomega.ContainSubstring(strings.ToLower(tc.message)))
		})
	}
}

func TestRunTimesOutAndHonoursCancel(t *testing.T) {
	g := gomega.NewWithT(t)
	hang := netperf.Func{Name: "hang", Fn: func(ctx context.Context, _ []string) ([]byte, []byte, error) {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}}
	spec := netperf.Spec{Host: "192.0.2.1", Test: results.TCPStream, Duration: time.Second, MessageBytes: 1, Timeout: 50 * time.Millisecond}
	_, err := netperf.Run(context.Background(), hang, spec)
	g.Expect(err).To(gomega.MatchError(netperf.ErrTimeout))
	g.Expect(err.Error()).To(gomega.ContainSubstring("no result after 50ms"))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	spec.Timeout = 0
	_, err = netperf.Run(ctx, hang, spec)
	g.Expect(err).To(gomega.MatchError(context.Canceled))
}

func TestVersion(t *testing.T) {
	g := gomega.NewWithT(t)
	v, err := netperf.Version(context.Background(), netperf.Local{}, "")
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(v).To(gomega.HavePrefix("Netperf version 2."))
	_, err = netperf.Version(context.Background(), netperf.Local{}, "/nonexistent/netperf")
	g.Expect(err).To(gomega.MatchError(netperf.ErrNetperfMissing))
}

// An ssh that cannot reach the guest exits 255 and says why on stderr only:
// the error carries it.
func TestVersionSaysWhySSHFailed(t *testing.T) {
	g := gomega.NewWithT(t)
	ssh := filepath.Join(t.TempDir(), "ssh")
	g.Expect(os.WriteFile(ssh, []byte("#!/bin/sh\necho 'ssh: connect to host 10.85.1.31 port 22: Connection refused' >&2\nexit 255\n"), 0o755)).To(gomega.Succeed())
	_, err := netperf.Version(context.Background(), netperf.Local{}, ssh)
	g.Expect(err).To(gomega.MatchError(gomega.And(gomega.ContainSubstring("exit status 255"), gomega.ContainSubstring("port 22: Connection refused"))))
}

func TestStartNetserverReportsBusyPort(t *testing.T) {
	g := gomega.NewWithT(t)
	first := startNetserver(t, "")
	second, err := netperf.StartNetserver(context.Background(), netperf.NetserverOptions{Addr: first.Addr, Port: first.Port})
	if err == nil {
		t.Cleanup(func() { _ = second.Stop() })
	}
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("is not free")))
}

// newNetNS makes a network namespace with loopback up and, when addr is set,
// addr on lo: glibc's getaddrinfo (AI_ADDRCONFIG) refuses even literal
// addresses while a namespace has no non-loopback address.
func newNetNS(t *testing.T, addr string) ns.NetNS {
	t.Helper()
	netns, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("failed to create netns: %v", err)
	}
	t.Cleanup(func() {
		netns.Close()
		if err := testutils.UnmountNS(netns); err != nil {
			t.Errorf("failed to remove netns %s: %v", netns.Path(), err)
		}
	})
	err = netns.Do(func(ns.NetNS) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		if addr == "" {
			return nil
		}
		a, err := netlink.ParseAddr(addr)
		if err != nil {
			return err
		}
		return netlink.AddrAdd(lo, a)
	})
	if err != nil {
		t.Fatalf("failed to set up lo in %s: %v", netns.Path(), err)
	}
	return netns
}

func TestNetNSExecutor(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("runs netperf against a netserver in the namespace", func(t *testing.T) {
		g := gomega.NewWithT(t)
		netns := newNetNS(t, "10.211.0.1/32")
		srv := startNetserver(t, netns.Path())
		ex := netperf.NetNS{Path: netns.Path()}
		// The namespace's loopback is its own: the netserver is not reachable from here.
		_, err := netperf.Run(context.Background(), netperf.Local{}, netperf.Spec{Host: srv.Addr, Port: srv.Port, Test: results.TCPStream, Duration: time.Second, MessageBytes: 4096})
		g.Expect(err).To(gomega.MatchError(netperf.ErrNetserverUnreachable))
		res, err := netperf.Run(context.Background(), ex, netperf.Spec{Host: srv.Addr, Port: srv.Port, Test: results.TCPRR, Duration: time.Second, MessageBytes: 1})
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(res.TransactionsPerSec).To(gomega.BeNumerically(">", 0))
	})
	t.Run("a namespace with only loopback does not resolve 127.0.0.1", func(t *testing.T) {
		g := gomega.NewWithT(t)
		netns := newNetNS(t, "")
		srv := startNetserver(t, netns.Path())
		_, err := netperf.Run(context.Background(), netperf.NetNS{Path: netns.Path()}, netperf.Spec{Host: srv.Addr, Port: srv.Port, Test: results.TCPStream, Duration: time.Second, MessageBytes: 4096})
		g.Expect(err).To(gomega.MatchError(netperf.ErrHostUnresolvable))
		g.Expect(err.Error()).To(gomega.ContainSubstring("via netns " + netns.Path()))
	})
	t.Run("missing namespace", func(t *testing.T) {
		g := gomega.NewWithT(t)
		_, _, err := netperf.NetNS{Path: "/run/netns/fpnp-does-not-exist"}.Run(context.Background(), []string{"true"})
		g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("failed to open network namespace")))
	})
}

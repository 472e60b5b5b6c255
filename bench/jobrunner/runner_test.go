package jobrunner_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/bench"
	"github.com/fastpath-io/fastpath/bench/jobrunner"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

func int32s(xs []int32) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

// The controller renders the runner's argv with benchjob.RunnerArgs.Args;
// the runner (ParseRunnerArgs) must parse exactly that into the same matrix,
// paths, SSH clients and outcome ConfigMap, so the contract cannot drift.
func TestRunnerParsesTheArgsBenchjobRenders(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    benchjob.RunnerArgs
	}{
		{"Pod mode, papers' matrix", benchjob.RunnerArgs{
			Tests: []string{"TCP_STREAM", "TCP_RR"}, SocketSizes: []int32{65536, 262144}, MessageSizes: []int32{512, 4096, 16384, 65536},
			RRSizes: []int32{benchjob.RRMessageBytes}, Sessions: []int32{1, 5}, Pairs: []int32{1}, Duration: time.Minute, Repetitions: 3,
			Paths: []benchjob.RunnerPath{
				{Name: benchjob.PathFastPath, Servers: []string{"10.250.0.3"}, MTU: 9000},
				{Name: benchjob.PathBaseline, Servers: []string{"10.244.0.7"}},
			},
			ResultsConfigMap: "apps/quick-results", RunID: "quick-run-2",
		}},
		{"VM mode, scale-out to 2 pairs, IPv6 server, fractional duration", benchjob.RunnerArgs{
			Tests: []string{"TCP_STREAM"}, SocketSizes: []int32{262144}, MessageSizes: []int32{65536},
			RRSizes: []int32{1}, Sessions: []int32{1}, Pairs: []int32{1, 2}, Duration: 1500 * time.Millisecond, Repetitions: 1,
			Paths: []benchjob.RunnerPath{
				{Name: benchjob.PathFastPath, Servers: []string{"10.250.0.3", "fd00::4"}, MTU: 65000},
				{Name: benchjob.PathBaseline, Servers: []string{"10.244.1.7", "10.244.1.8"}},
			},
			SSH: &benchjob.RunnerSSH{Clients: []string{"10.244.1.5", "10.244.1.9"}, User: "cloud", KeyFile: benchjob.SSHKeyDir + "/" + benchjob.SSHKeyFile},
			HostCPU: &benchjob.RunnerHostCPU{Agent: "10.0.0.7:9446", Launchers: [][2]string{
				{"6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01", "0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02"},
				{"3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c03", "11111111-2222-4333-8444-555555555555"},
			}},
			ResultsConfigMap: "apps/vmb-results", RunID: "vmb-run-1",
		}},
		{"VM mode, TCP and vsock tests", benchjob.RunnerArgs{
			Tests: []string{"TCP_STREAM", "VSOCK_STREAM", "VSOCK_RR"}, SocketSizes: []int32{262144}, MessageSizes: []int32{65536},
			RRSizes: []int32{1}, Sessions: []int32{1}, Pairs: []int32{1}, Duration: 2 * time.Second, Repetitions: 1,
			Paths:            []benchjob.RunnerPath{{Name: benchjob.PathFastPath, Servers: []string{"10.250.0.3"}, MTU: 9000}},
			SSH:              &benchjob.RunnerSSH{Clients: []string{"10.244.1.5"}, User: "cloud", KeyFile: benchjob.SSHKeyDir + "/" + benchjob.SSHKeyFile},
			VSock:            &benchjob.RunnerVSock{CID: 2, Port: 20001, ServicePort: 5432, Servers: []string{"10.244.1.7"}},
			ResultsConfigMap: "apps/vmb-results", RunID: "vmb-run-1",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			argv, err := tc.a.Args()
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(argv[0]).To(gomega.Equal("run"))
			c, err := jobrunner.ParseRunnerArgs(argv[1:])
			g.Expect(err).NotTo(gomega.HaveOccurred())

			g.Expect(c.Matrix.Tests).To(gomega.Equal(tc.a.Tests))
			g.Expect(c.Matrix.SocketSizes).To(gomega.Equal(int32s(tc.a.SocketSizes)))
			g.Expect(c.Matrix.MessageSizes).To(gomega.Equal(int32s(tc.a.MessageSizes)))
			g.Expect(c.Matrix.RRSizes).To(gomega.Equal(int32s(tc.a.RRSizes)))
			g.Expect(c.Matrix.Sessions).To(gomega.Equal(int32s(tc.a.Sessions)))
			g.Expect(c.Matrix.Pairs).To(gomega.Equal(int32s(tc.a.Pairs)))
			g.Expect(c.Matrix.Duration).To(gomega.Equal(benchjob.WholeSeconds(tc.a.Duration)))
			g.Expect(c.Matrix.Repetitions).To(gomega.Equal(int(tc.a.Repetitions)))
			ipPaths := c.Paths
			if v := tc.a.VSock; v != nil {
				g.Expect(c.Paths).To(gomega.HaveLen(len(tc.a.Paths) + 1))
				ipPaths = c.Paths[:len(tc.a.Paths)]
				vp := c.Paths[len(tc.a.Paths)]
				g.Expect(vp.Name).To(gomega.Equal(benchjob.PathVSock))
				g.Expect(vp.VSock).To(gomega.BeTrue())
				g.Expect(vp.Endpoints).To(gomega.HaveLen(1))
				g.Expect(vp.Endpoints[0].Host).To(gomega.Equal("2"), "the client VM dials its host, CID 2, where the relay listens")
				g.Expect(vp.Endpoints[0].Port).To(gomega.BeEquivalentTo(v.Port))
				g.Expect(guestAddrs(c.SSHServers)).To(gomega.Equal(v.Servers))
				g.Expect(c.VSockServerPort).To(gomega.BeEquivalentTo(v.ServicePort))
				r := c.Runner()
				g.Expect(r.Tools["VSOCK_STREAM"]).To(gomega.Equal(bench.GuestVSock{Binary: "/tmp/fastpath-bench-vmb-run-1-client"}), "the vsock client runs in the client VM")
				g.Expect(r.Paths[len(r.Paths)-1].Endpoints[0].Executor).To(gomega.Equal(c.SSH(bench.SSHGuest{User: "cloud", Addr: netip.MustParseAddr("10.244.1.5")})))
			}
			g.Expect(ipPaths).To(gomega.HaveLen(len(tc.a.Paths)))
			for i, p := range tc.a.Paths {
				g.Expect(c.Paths[i].Name).To(gomega.Equal(p.Name))
				g.Expect(c.Paths[i].MTU).To(gomega.Equal(int(p.MTU)))
				g.Expect(c.MTUGiven[p.Name]).To(gomega.Equal(p.MTU > 0))
				var hosts []string
				for _, ep := range c.Paths[i].Endpoints {
					g.Expect(ep.Port).To(gomega.BeZero(), "servers listen on the default port %d", benchjob.NetserverPort)
					hosts = append(hosts, ep.Host)
				}
				g.Expect(hosts).To(gomega.Equal(p.Servers))
			}
			ns, name, _ := strings.Cut(tc.a.ResultsConfigMap, "/")
			g.Expect([]string{c.ResultsNamespace, c.ResultsName, c.RunID}).To(gomega.Equal([]string{ns, name, tc.a.RunID}))
			g.Expect(netperf.DefaultControlPort).To(gomega.Equal(benchjob.NetserverPort))

			r := c.Runner()
			g.Expect(r.Validate()).To(gomega.Succeed())
			if tc.a.SSH == nil {
				g.Expect(c.VMMode()).To(gomega.BeFalse())
				for _, p := range r.Paths {
					for _, ep := range p.Endpoints {
						g.Expect(ep.Executor).To(gomega.BeNil(), "Pod mode: clients run in the runner pod")
					}
				}
				return
			}
			g.Expect(guestAddrs(c.SSHClients)).To(gomega.Equal(tc.a.SSH.Clients))
			if h := tc.a.HostCPU; h != nil {
				g.Expect(c.HostCPU).NotTo(gomega.BeNil())
				g.Expect(c.HostCPU.Agent.String()).To(gomega.Equal(h.Agent))
				g.Expect(c.HostCPU.Launchers).To(gomega.Equal(h.Launchers))
				g.Expect(c.HostCPU.Pods(1)).To(gomega.Equal(h.Launchers[0][:]), "a one-pair point reads pair 1's launchers only")
				g.Expect(r.HostCPU).NotTo(gomega.BeNil())
			} else {
				g.Expect(c.HostCPU).To(gomega.BeNil())
				g.Expect(r.HostCPU).To(gomega.BeNil())
			}
			g.Expect(c.SSHUser).To(gomega.Equal(tc.a.SSH.User))
			g.Expect(c.SSHKey).To(gomega.Equal(tc.a.SSH.KeyFile))
			// Pair i's netperf runs on client VM i, for every path, with the
			// ssh options the contract states.
			for _, p := range r.Paths[:len(ipPaths)] {
				for i, ep := range p.Endpoints {
					target := tc.a.SSH.User + "@" + tc.a.SSH.Clients[i]
					g.Expect(ep.Executor).To(gomega.Equal(netperf.Prefix{Name: "ssh " + target, Quote: true, Argv: []string{
						"ssh", "-o", "BatchMode=yes", "-i", tc.a.SSH.KeyFile, "-o", "StrictHostKeyChecking=no",
						"-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-l", tc.a.SSH.User, "--", tc.a.SSH.Clients[i]}}))
				}
			}
		})
	}
}

func TestRunnerRejectsArgsOutsideTheContract(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	g := gomega.NewWithT(t)
	g.Expect(os.WriteFile(key, []byte("k"), 0o600)).To(gomega.Succeed())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--path", "a=10.0.0.1", "--results-configmap", "apps"}, `failed to parse --results-configmap "apps": want namespace/name`},
		{[]string{"--path", "a=10.0.0.1", "--results-configmap", "apps/x/y", "--run-id", "r"}, "want namespace/name"},
		{[]string{"--path", "a=10.0.0.1", "--results-configmap", "apps/x"}, "--results-configmap needs --run-id"},
		{[]string{"--path", "a=10.0.0.1,10.0.0.2", "--pairs", "1,2", "--ssh-clients", "10.0.0.3", "--ssh-user", "u", "--ssh-key", key}, "1 --ssh-clients, pairs up to 2 need as many"},
		{[]string{"--path", "a=10.0.0.1", "--ssh-clients", "10.0.0.3", "--ssh-key", key}, `failed to parse --ssh-clients entry "10.0.0.3": no user`},
		{[]string{"--path", "a=10.0.0.1", "--ssh-clients", "10.0.0.3", "--ssh-user", "u"}, "--ssh-clients needs --ssh-key"},
		{[]string{"--path", "a=10.0.0.1", "--ssh-user", "u"}, "need --ssh-clients"},
		{[]string{"--path", "a=10.0.0.1", "--mtu", "b=9000"}, "--mtu b names no --path"},
		{[]string{"--path", "a=10.0.0.1", "--path", "a=10.0.0.2"}, "path a (MTU 0) named twice"},
		{[]string{"--path", "a=10.0.0.1", "--transport", "tcp"}, `failed to parse --transport "tcp"`},
		{[]string{"--path", "a=10.0.0.1", "--transport", "unix:/tmp/x"}, "needs --cid"},
		{[]string{"--path", "a=10.0.0.1", "--cid", "3"}, "--cid applies to --transport unix:<dir> only"},
		{[]string{"--path", "a=10.0.0.1", "--host-cpu-agent", "10.0.0.7:9446", "--launcher-pods", "6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01/0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02"}, "--host-cpu-agent needs VM mode"},
		{[]string{"--path", "a=10.0.0.1,10.0.0.2", "--pairs", "1,2", "--ssh-clients", "10.0.0.3,10.0.0.4", "--ssh-user", "u", "--ssh-key", key, "--host-cpu-agent", "10.0.0.7:9446", "--launcher-pods", "6f1c2b9a-6d1e-4f0b-9a51-0c7d3e2a1b01/0d9e8f7a-1b2c-4d3e-8f4a-5b6c7d8e9f02"}, "1 entries, pairs up to 2"},
		{[]string{"--path", "a=10.0.0.1", "--host-cpu-agent", "node-1:9446", "--launcher-pods", "x/y"}, "want <IP address>:<port>"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			g := gomega.NewWithT(t)
			_, err := jobrunner.ParseRunnerArgs(tc.args)
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
		})
	}
}

func TestOutcomeTargetFromUnparsableArgs(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		ns, name, run string
		ok            bool
	}{
		{[]string{"--bogus", "--results-configmap", "apps/r", "--run-id", "j"}, "apps", "r", "j", true},
		{[]string{"--results-configmap=apps/r", "-run-id=j"}, "apps", "r", "j", true},
		{[]string{"--results-configmap", "apps/r"}, "apps", "r", "", false},
		{[]string{"--results-configmap", "apps", "--run-id", "j"}, "apps", "", "j", false},
	} {
		g := gomega.NewWithT(t)
		ns, name, run, ok := jobrunner.OutcomeTarget(tc.args)
		g.Expect([]any{ns, name, run, ok}).To(gomega.Equal([]any{tc.ns, tc.name, tc.run, tc.ok}), strings.Join(tc.args, " "))
	}
}

// guestAddrs returns the address of each guest, as the contract renders them.
func guestAddrs(gs []bench.SSHGuest) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Addr.String())
	}
	return out
}

// No value of the runner's command line reaches ssh or netperf as an
// option: the user must be a POSIX user name, every guest and every server
// of an IP path an IP address; each refusal names the flag.
func TestRunnerRefusesValuesThatCouldBeOptions(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	gomega.NewWithT(t).Expect(os.WriteFile(key, []byte("k"), 0o600)).To(gomega.Succeed())
	vm := func(user, clients string) []string {
		return []string{"--path", "fastpath=10.250.0.3", "--ssh-clients", clients, "--ssh-user", user, "--ssh-key", key}
	}
	vsock := func(servers string) []string {
		return []string{"--tests", "VSOCK_STREAM", "--vsock-path", "v=2:20000", "--ssh-clients", "10.244.1.5", "--ssh-user", "fedora",
			"--ssh-key", key, "--ssh-servers", servers, "--vsock-server-port", "5432"}
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" means accepted
	}{
		{"proxy command as the user", vm("-oProxyCommand=touch /tmp/pwned", "10.244.1.5"), `failed to parse --ssh-user "-oProxyCommand=touch /tmp/pwned": want a POSIX user name`},
		{"double dash as the user", vm("--", "10.244.1.5"), `failed to parse --ssh-user "--"`},
		{"a user with a space", vm("cloud user", "10.244.1.5"), `failed to parse --ssh-user "cloud user"`},
		{"a user with a shell word", vm("a;id", "10.244.1.5"), `failed to parse --ssh-user "a;id"`},
		{"proxy command as the client", vm("fedora", "-oProxyCommand=touch /tmp/pwned"), `failed to parse --ssh-clients entry "-oProxyCommand=touch /tmp/pwned"`},
		{"proxy command as a client's user", vm("fedora", "-oProxyCommand=x@10.244.1.5"), `failed to parse --ssh-clients entry "-oProxyCommand=x@10.244.1.5": user "-oProxyCommand=x" is not a POSIX user name`},
		{"a host name as the client", vm("fedora", "guest.example"), `"guest.example" is not an IPv4 or IPv6 address`},
		{"a client with a space", vm("fedora", "10.244.1.5 -v"), `"10.244.1.5 -v" is not an IPv4 or IPv6 address`},
		{"an ssh URI as the client", vm("fedora", "ssh://root@10.244.1.5"), "is not a POSIX user name"},
		{"a zone as the client", vm("fedora", "fe80::1%eth0"), `"fe80::1%eth0" is not an IPv4 or IPv6 address without a zone`},
		{"double dash as the client", vm("fedora", "--"), `"--" is not an IPv4 or IPv6 address`},
		{"an IPv6 client", vm("fedora", "fd00::5"), ""},
		{"a bracketed IPv6 client with its user", vm("fedora", "cloud@[fd00::5]"), ""},
		{"proxy command as a server", []string{"--path", "fastpath=-oProxyCommand=x"}, `failed to parse --path fastpath: server "-oProxyCommand=x" is not an IPv4 or IPv6 address`},
		{"a host name as a server", []string{"--path", "fastpath=netserver.example"}, `failed to parse --path fastpath: server "netserver.example"`},
		{"an IPv6 server", []string{"--path", "fastpath=fd00::4"}, ""},
		{"proxy command as a vsock server VM", vsock("-oProxyCommand=x"), `failed to parse --ssh-servers entry "-oProxyCommand=x"`},
		{"a vsock server VM", vsock("10.244.1.7"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			c, err := jobrunner.ParseRunnerArgs(tc.args)
			if tc.want != "" {
				g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			// What is accepted reaches ssh after -l and "--" only.
			for _, p := range c.Runner().Paths {
				for _, ep := range p.Endpoints {
					if pre, ok := ep.Executor.(netperf.Prefix); ok {
						n := len(pre.Argv)
						g.Expect(pre.Argv[n-4 : n-1]).To(gomega.HaveExactElements(gomega.Equal("-l"), gomega.Not(gomega.HavePrefix("-")), gomega.Equal("--")))
					}
				}
			}
		})
	}
}

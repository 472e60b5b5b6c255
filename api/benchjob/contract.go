package benchjob

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// The ConfigMap protocol between the runner and the controller.
//
// The controller creates the ConfigMap ResultsConfigMapName(benchmark), owned
// by the benchmark and empty (no data), and gives the runner Job the
// ServiceAccount RunnerName(benchmark), bound to a Role that allows get,
// update and patch on that one ConfigMap (resourceNames) and nothing else.
//
// When `fastpath-bench run` ends it writes, in ONE request (a JSON merge patch
// of .data, or a get and update retried on conflict), either
//
//	data: {runID: <--run-id>, results.json: <the results.Document JSON>}
//
// on success, or
//
//	data: {runID: <--run-id>, error: <one line>, errorReason: <reason>}
//
// on failure, and prints the same document (or error) on stdout/stderr. It then
// exits 0 on success, non-zero on failure. The controller ignores data whose
// runID is not the run it started (a runner of an earlier generation), reads
// results.json with api/benchjob/results.Decode (a document that does not decode or
// validate is ResultsInvalid), and maps errorReason to a condition reason:
// ErrorReasonNetserverUnreachable and ErrorReasonRunnerFailed as they are,
// anything else to RunnerFailed with the reason in the message.
//
// A ConfigMap holds at most 1 MiB (Kubernetes' object size limit): if the
// encoded document is larger, the runner drops samples[].perSession and tries
// again, and if it is still too large writes error/errorReason RunnerFailed
// saying so.
const (
	// ResultsKey holds the full results document (api/benchjob/results.Document,
	// JSON) on success.
	ResultsKey = "results.json"
	// ErrorKey holds one line saying what failed, naming the endpoint and command
	// (the netperf.RunError text).
	ErrorKey = "error"
	// ErrorReasonKey holds an UpperCamelCase reason, one of the ErrorReason* values.
	ErrorReasonKey = "errorReason"
	// RunIDKey holds the --run-id the runner was started with.
	RunIDKey = "runID"
)

// Values of ErrorReasonKey the runner writes.
const (
	// ErrorReasonNetserverUnreachable: netperf could not open its control
	// connection to a netserver (netperf.ErrNetserverUnreachable or
	// netperf.ErrHostUnresolvable). The message names the endpoint.
	ErrorReasonNetserverUnreachable = "NetserverUnreachable"
	// ErrorReasonRunnerFailed: anything else (netperf missing, SSH failed,
	// output not understood, a session lost its connection, results too large).
	ErrorReasonRunnerFailed = "RunnerFailed"
)

// Path names the runner reports in results.json and the controller reads back.
// They follow api/benchjob/results' convention that reference paths start with
// "baseline".
const (
	// PathFastPath is the attachment's fast virtio-net network.
	PathFastPath = "fastpath"
	// PathBaseline is the default pod network (spec.baseline PodNetwork).
	PathBaseline = "baseline"
	// PathVSock is the attachment's vsock path: VSOCK_* tests from the client
	// VM to the host (CID 2) on the relay port of the server VM's vsock
	// service, which the node agent forwards into the server VM. It has no
	// baseline.
	PathVSock = "fastpath-vsock"
)

// NetserverPort is netserver's default control port (netperf manual, "-p
// portnum"; netperf.DefaultControlPort). The netserver pods listen on it and
// the VM samples' cloud-init starts netserver on it.
const NetserverPort = 12865

// RRMessageBytes is the request and response size of TCP_RR in bytes: the
// papers measure latency with 1-byte transactions (docs/design.md §5.1).
const RRMessageBytes = 1

// SSHKeyDir is where the runner Job mounts the Secret of spec.sshKeySecretRef
// (VM mode), read-only with mode 0400; the key is SSHKeyDir/SSHKeyFile.
const (
	SSHKeyDir  = "/etc/fastpath-bench/ssh"
	SSHKeyFile = "ssh-privatekey"
)

// RunnerPath is one --path of the runner: a path name and the server address of
// every pair (Servers[i] is pair i+1).
type RunnerPath struct {
	// Name is reported as results.Run.Path: PathFastPath or PathBaseline.
	Name string
	// Servers are netserver addresses (IPv4 or IPv6, no port: NetserverPort).
	Servers []string
	// MTU of the client's interface on this path in bytes; 0 when unknown (no
	// --mtu flag is rendered).
	MTU int32
}

// RunnerSSH says how the runner reaches the client VMs in VM mode.
type RunnerSSH struct {
	// Clients[i] is the address of pair i+1's client VM (its pod-network IP).
	Clients []string
	// User is the guest user (spec.sshUser).
	User string
	// KeyFile is the private key, SSHKeyDir/SSHKeyFile.
	KeyFile string
}

// RunnerVSock is the vsock path of VM mode (one pair: a vsock service
// targets one VM).
type RunnerVSock struct {
	// CID and Port are what the client VM dials, as the service's
	// FastPathAttachment status.vsockServices[] gives them: in mode Relay the
	// host (CID 2, v1alpha1.HostCID) at the service's relayPort, where the
	// node agent's relay listens; in mode Sibling the server VM's CID in the
	// attachment's vhost-user group (targetCID) at the service port.
	CID, Port int64
	// ServicePort is the service's port in the server VM, where the runner
	// starts vsock-server.
	ServicePort int64
	// Servers are the server VMs' pod-network addresses, reached over SSH to
	// start vsock-server.
	Servers []string
}

// RunnerHostCPU is where the runner reads the host's CPU counters in VM
// mode (docs/design.md §5.3): the node agent's host CPU endpoint on the
// node the VMs run on, and their virt-launcher pods.
type RunnerHostCPU struct {
	// Agent is "<node IP>:<port>" (the launcher pods' status.hostIP and
	// the operator's --agent-host-cpu-port).
	Agent string
	// Launchers[i] are pair i+1's client and server virt-launcher pod UIDs.
	Launchers [][2]string
}

// RunnerArgs is the command line of `fastpath-bench run` in the runner Job:
// the contract between the controller, which renders it with Args, and the
// runner, which must accept exactly these flags. Every flag is rendered with
// "--flag value" (two argv words) in the order below:
//
//	run
//	--tests         TCP_STREAM,TCP_RR       test names, comma-separated
//	--socket-sizes  65536,262144            bytes (netperf -s/-S), comma-separated
//	--message-sizes 512,4096,16384,65536    bytes (netperf -m), stream tests
//	--rr-sizes      1                       bytes (netperf -r n,n), RR tests
//	--sessions      1,5                     concurrent sessions per pair
//	--pairs         1,4                     pairs at once; each point is run at each count
//	--duration      60s                     per run (netperf -l), whole seconds, Go duration syntax
//	--repetitions   3                       runs per point; median/min/max reported
//	--path          fastpath=10.250.0.3,10.250.0.4   repeated: name=server[,server...],
//	--path          baseline=10.244.1.7,10.244.1.8   one server per pair, in pair order
//	--mtu           fastpath=9000           repeated, optional: name=bytes
//	--ssh-clients   10.244.1.5,10.244.1.9   VM mode only: client VM of each pair
//	--ssh-user      fedora                  VM mode only
//	--ssh-key       /etc/fastpath-bench/ssh/ssh-privatekey   VM mode only
//	--vsock-path    fastpath-vsock=2:20000  VM mode with VSOCK_* tests: CID 2 (the host) and the relay port
//	--ssh-servers   10.244.1.7              VM mode with VSOCK_* tests: server VM of each pair
//	--vsock-server-port 5432                VM mode with VSOCK_* tests: the service's port in the server VM
//	--host-cpu-agent 10.0.0.7:9446         VM mode, optional: the node agent's host CPU endpoint on the VMs' node
//	--launcher-pods <uid>/<uid>,...         with --host-cpu-agent: client and server virt-launcher pod UIDs per pair
//	--results-configmap <namespace>/<name>  where to write the outcome (see ResultsKey)
//	--run-id        <job name>              echoed into the ConfigMap as runID
//
// Sizes and counts are plain decimal numbers, so bench.ParseSizes,
// ParseCounts, ParsePath and ParseNameInt parse them. Servers listen on
// NetserverPort, so no port is rendered.
//
// Without --ssh-clients every client runs in the runner's own pod (Pod mode:
// the pod is attached to the fast network; pair i's sessions go to server i of
// each path, so with several pairs the clients share the runner pod). With
// --ssh-clients, pair i's netperf (for every path) runs on client VM i through
//
//	ssh -i <ssh-key> -o BatchMode=yes -o StrictHostKeyChecking=no
//	    -o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -l <ssh-user> -- <client> 'netperf ...'
//
// (netperf.SSH): the user is -l's argument and the client comes after "--",
// so neither can be read as an option; the runner refuses a user that is not
// a POSIX user name (wellknown.SSHUserPattern, as the CRD) and clients and
// servers that are not IP addresses. Guest host keys are unknown and change
// with every VM, so they are not checked. The guest must have netperf installed and the servers must
// run netserver on NetserverPort; the runner says which one is missing
// (netperf.Diagnose) rather than reporting zeros. With VSOCK_* tests the
// runner copies itself into the client and server VMs over the same SSH,
// starts `vsock-server --port <vsock-server-port>` in the server VM and runs
// `vsock-client --server 2:<relay port>` in the client VM; --path paths get
// the TCP tests only and the --vsock-path the VSOCK tests only.
type RunnerArgs struct {
	Tests        []string
	SocketSizes  []int32
	MessageSizes []int32
	RRSizes      []int32
	Sessions     []int32
	Pairs        []int32
	// Duration is rounded up to whole seconds by Args (netperf -l takes seconds).
	Duration    time.Duration
	Repetitions int32
	Paths       []RunnerPath
	// SSH is set in VM mode only.
	SSH *RunnerSSH
	// VSock is set in VM mode with VSOCK_* tests only (SSH is set too).
	VSock *RunnerVSock
	// HostCPU is set in VM mode when the operator knows the agent's host
	// CPU port and every launcher pod (SSH is set too).
	HostCPU *RunnerHostCPU
	// ResultsConfigMap is "<namespace>/<name>".
	ResultsConfigMap string
	// RunID identifies this run (the Job name).
	RunID string
}

// Args renders the argv after the program name, starting with "run". It fails
// when a path has no servers or the pair count of a path (or of SSH clients)
// is below max(Pairs): the runner would reject it.
func (a RunnerArgs) Args() ([]string, error) {
	maxPairs := int32(0)
	for _, p := range a.Pairs {
		maxPairs = max(maxPairs, p)
	}
	args := []string{"run",
		"--tests", strings.Join(a.Tests, ","),
		"--socket-sizes", joinInts(a.SocketSizes),
		"--message-sizes", joinInts(a.MessageSizes),
		"--rr-sizes", joinInts(a.RRSizes),
		"--sessions", joinInts(a.Sessions),
		"--pairs", joinInts(a.Pairs),
		"--duration", WholeSeconds(a.Duration).String(),
		"--repetitions", strconv.Itoa(int(a.Repetitions)),
	}
	if len(a.Paths) == 0 && a.VSock == nil {
		return nil, fmt.Errorf("failed to render runner args: no paths")
	}
	for _, p := range a.Paths {
		if len(p.Servers) < int(maxPairs) {
			return nil, fmt.Errorf("failed to render runner args: path %s has %d servers, pairs up to %d need as many", p.Name, len(p.Servers), maxPairs)
		}
		args = append(args, "--path", p.Name+"="+strings.Join(p.Servers, ","))
	}
	for _, p := range a.Paths {
		if p.MTU > 0 {
			args = append(args, "--mtu", fmt.Sprintf("%s=%d", p.Name, p.MTU))
		}
	}
	if a.SSH != nil {
		if len(a.SSH.Clients) < int(maxPairs) {
			return nil, fmt.Errorf("failed to render runner args: %d SSH clients, pairs up to %d need as many", len(a.SSH.Clients), maxPairs)
		}
		args = append(args, "--ssh-clients", strings.Join(a.SSH.Clients, ","), "--ssh-user", a.SSH.User, "--ssh-key", a.SSH.KeyFile)
	}
	if v := a.VSock; v != nil {
		switch {
		case a.SSH == nil:
			return nil, fmt.Errorf("failed to render runner args: the vsock path needs VM mode (SSH)")
		case maxPairs != 1 || len(v.Servers) != 1:
			return nil, fmt.Errorf("failed to render runner args: the vsock path measures one pair, got pairs up to %d and %d servers", maxPairs, len(v.Servers))
		case v.CID < fastpathv1alpha1.HostCID || v.Port < 1 || v.ServicePort < 1:
			return nil, fmt.Errorf("failed to render runner args: the vsock path needs a CID of %d or more, a port and a service port, got %d, %d and %d", fastpathv1alpha1.HostCID, v.CID, v.Port, v.ServicePort)
		}
		args = append(args, "--vsock-path", fmt.Sprintf("%s=%d:%d", PathVSock, v.CID, v.Port),
			"--ssh-servers", strings.Join(v.Servers, ","), "--vsock-server-port", strconv.FormatInt(v.ServicePort, 10))
	}
	if h := a.HostCPU; h != nil {
		if a.SSH == nil || len(h.Launchers) < int(maxPairs) {
			return nil, fmt.Errorf("failed to render runner args: host CPU needs VM mode and the launcher pods of every pair, got %d for pairs up to %d", len(h.Launchers), maxPairs)
		}
		ls := make([]string, len(h.Launchers))
		for i, l := range h.Launchers {
			ls[i] = l[0] + "/" + l[1]
		}
		args = append(args, "--host-cpu-agent", h.Agent, "--launcher-pods", strings.Join(ls, ","))
	}
	args = append(args, "--results-configmap", a.ResultsConfigMap, "--run-id", a.RunID)
	return args, nil
}

// WholeSeconds rounds d up to whole seconds, at least one (netperf -l takes
// seconds; bench.Matrix rejects fractions).
func WholeSeconds(d time.Duration) time.Duration {
	s := (d + time.Second - 1) / time.Second
	return max(s, 1) * time.Second
}

func joinInts(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

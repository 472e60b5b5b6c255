package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/topology"
	"github.com/fastpath-io/fastpath/e2e/localenv/emulation"
	"github.com/fastpath-io/fastpath/internal/testing/testenv"

	"github.com/fastpath-io/fastpath/e2e/localenv/runstate"
)

// StackOptions configure the local stack. Prefixes and the pod CIDR must
// differ between stacks that run at the same time on one host.
type StackOptions struct {
	// BinDir holds kube-apiserver, etcd, kubectl and the Fastpath binaries
	// (make build). Required.
	BinDir string
	// WorkDir receives kubeconfig, the operator and agent logs, and the run
	// state (WorkDir/state); the emulation's state, the agent's CNI directory
	// and the vsock sockets live in the short directory runstate.RunDir gives
	// for it, whatever WorkDir's length. Required; a later run with the same
	// WorkDir cleans up after a killed one.
	WorkDir string
	// Namespaces served by the emulation (empty: all).
	Namespaces []string
	// NetNSPrefix, HostIfPrefix and PodCIDR go to the emulation (see
	// emulation.Options).
	NetNSPrefix  string
	HostIfPrefix string
	PodCIDR      netip.Prefix
	// Bridges are the node bridges the run's attachments will make the agent
	// create (name and datapath); they are deleted at the end and after a
	// killed run.
	Bridges []fastpathv1alpha1.NetworkSpec
	// RunnerImage is passed to the operator (--runner-image); the emulated
	// kubelet runs BinDir/fastpath-bench for any image.
	RunnerImage string
	// Guests is the emulation's guest kind: "netns" (default) or "qemu"
	// (real VMs; BinDir also holds the guest image and vhost-device-vsock).
	Guests string
	// Out receives progress and EMULATED lines.
	Out io.Writer
}

// Stack is the local environment `make demo` and the e2e suite run on: the
// embedded control plane, the real operator and agent as processes, and the
// emulation of KubeVirt, Multus and the kubelet in this process.
type Stack struct {
	opts StackOptions
	// Env is the control plane; Client an admin client of it.
	Env    *testenv.Env
	Client client.Client
	// Kubeconfig is the admin kubeconfig file (for kubectl and the processes).
	Kubeconfig string
	// Emulator is the running emulation.
	Emulator *emulation.Emulator
	// NodeName is this host's name, the node everything runs on.
	NodeName string
	// CNIBinDir is where the agent installs the fastpath plugin; VSOCKRoot is
	// the emulated vsock transport's root, shared by the agent's relay and the
	// emulated guests; SiblingSocketDir (real guests only, else "") holds the
	// vhost-user sockets of the agent's vhost-device-vsock (vsock mode
	// Sibling).
	CNIBinDir, VSOCKRoot, SiblingSocketDir string
	// OperatorLog and AgentLog are the processes' log files.
	OperatorLog, AgentLog string

	operator, agent *process
	state           runState
	lock            *os.File
}

func (o StackOptions) statePath() string { return filepath.Join(o.WorkDir, "state", "run.json") }

// shortDir is the run's short directory for sockets and runtime state
// (runstate.RunDir): the emulation's state, with the launchers' libvirtd
// and QEMU sockets, under shortDir/emulation (kept after the run, for its
// logs); the agent's CNI directory and the vsock sockets under shortDir/run
// (removed at the end).
func (o StackOptions) shortDir() string {
	d, err := runstate.RunDir(filepath.Base(o.WorkDir), o.WorkDir)
	if err != nil { // only when the working directory is gone
		return filepath.Join(o.WorkDir, "short")
	}
	return d
}

func (o StackOptions) runDir() string { return filepath.Join(o.shortDir(), "run") }

// siblingDir is the agent's --sibling-socket-dir with real guests, "" else:
// vsock mode Sibling needs vhost-device-vsock and QEMU guests.
func (o StackOptions) siblingDir() string {
	if o.Guests != emulation.GuestsQEMU {
		return ""
	}
	return filepath.Join(o.runDir(), "sibling")
}

func (o StackOptions) emulationOptions() emulation.Options {
	return emulation.Options{
		Namespaces:   o.Namespaces,
		StateDir:     filepath.Join(o.shortDir(), "emulation"),
		Prefix:       o.NetNSPrefix,
		HostIfPrefix: o.HostIfPrefix,
		PodCIDR:      o.PodCIDR,
		// Only the directory the agent installs the plugin into: a failed
		// install must show, not be covered by bin/fastpath.
		CNIPath:          []string{filepath.Join(o.runDir(), "cni-bin"), "/usr/lib/cni"},
		VSOCKRoot:        filepath.Join(o.runDir(), "vsock"),
		SiblingSocketDir: o.siblingDir(),
		Binaries:         map[string]string{"fastpath-bench": filepath.Join(o.BinDir, "fastpath-bench")},
		Guests:           o.Guests,
		GuestBin:         o.BinDir,
		Out:              o.Out,
	}
}

// Requirements are the executables the stack needs, with the package or make
// target that provides each.
var Requirements = []struct{ Name, From string }{
	{"kube-apiserver", "make setup"}, {"etcd", "make setup"}, {"kubectl", "make setup"},
	{"fastpath", "make build"}, {"fastpath-operator", "make build"}, {"fastpath-agent", "make build"}, {"fastpath-bench", "make build"},
}

// HostTools are the host programs the emulation and the benchmark use.
var HostTools = []struct{ Name, From string }{
	{"netperf", "apt-get install netperf"}, {"netserver", "apt-get install netperf"},
	{"nft", "apt-get install nftables"}, {"ssh-keygen", "apt-get install openssh-client"},
	{"ip", "apt-get install iproute2"},
}

// CheckRequirements fails with one message naming everything missing.
func CheckRequirements(binDir string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("failed to check requirements: run as root (network namespaces, bridges, CNI)")
	}
	var missing []string
	for _, r := range Requirements {
		if st, err := os.Stat(filepath.Join(binDir, r.Name)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, fmt.Sprintf("%s (%s)", filepath.Join(binDir, r.Name), r.From))
		}
	}
	for _, t := range HostTools {
		if _, err := exec.LookPath(t.Name); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s)", t.Name, t.From))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("failed to find %s", strings.Join(missing, ", "))
	}
	return nil
}

// CleanupLeftovers removes what a killed run with the same WorkDir and
// prefixes left behind: its processes (operator, agent, kube-apiserver,
// etcd), the emulation's namespaces, veths and CNI attachments, its bridges,
// and WorkDir/run. It prints what it removed.
func CleanupLeftovers(ctx context.Context, o StackOptions) error {
	var errs []error
	st, err := runstate.Load[runState](o.statePath())
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range killRecorded(st.Processes) {
		fmt.Fprintf(o.Out, "cleanup: killed leftover %s (pid %d)\n", filepath.Base(p.Exe), p.PID)
	}
	for _, d := range st.Dirs {
		// Only envtest's own temporary directories are recorded.
		if !strings.HasPrefix(d, os.TempDir()+"/k8s_test_framework_") {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("failed to remove %s: %w", d, err))
		}
	}
	for _, pid := range siblingBackendPIDs(o.siblingDir()) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
			fmt.Fprintf(o.Out, "cleanup: killed leftover vhost-device-vsock (pid %d)\n", pid)
		}
	}
	eo := o.emulationOptions()
	// The agent's copy may be gone with a killed run; bin/fastpath does the DEL.
	eo.CNIPath = append(eo.CNIPath, o.BinDir)
	if err := emulation.CleanupLeftovers(ctx, eo, o.Out); err != nil {
		errs = append(errs, err)
	}
	for _, b := range st.Bridges {
		if err := deleteBridge(b); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(o.runDir()); err != nil {
		errs = append(errs, fmt.Errorf("failed to remove %s: %w", o.runDir(), err))
	}
	if err := os.Remove(o.statePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func deleteBridge(b stateBridge) error {
	switch b.Datapath {
	case string(fastpathv1alpha1.DatapathOVS):
		if out, err := exec.Command("ovs-vsctl", "--timeout=5", "--if-exists", "del-br", b.Name).CombinedOutput(); err != nil {
			return fmt.Errorf("failed to delete OVS bridge %s: %w: %s", b.Name, err, strings.TrimSpace(string(out)))
		}
		return nil
	default:
		return topology.DeleteHostLink(b.Name)
	}
}

// StartStack cleans up after a killed run, then starts the control plane,
// writes the kubeconfig, starts the agent and the operator, and starts the
// emulation. On error, everything started so far is stopped.
func StartStack(ctx context.Context, o StackOptions) (_ *Stack, err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	lock, err := lockWorkDir(o.WorkDir)
	if err != nil {
		return nil, err
	}
	s := &Stack{opts: o, lock: lock}
	defer func() {
		if err != nil {
			_ = s.Stop()
		}
	}()
	if err := CleanupLeftovers(ctx, o); err != nil {
		return nil, fmt.Errorf("failed to clean up after an earlier run: %w", err)
	}
	if s.NodeName, err = os.Hostname(); err != nil {
		return nil, fmt.Errorf("failed to read the host name: %w", err)
	}
	s.CNIBinDir = filepath.Join(o.runDir(), "cni-bin")
	s.VSOCKRoot = filepath.Join(o.runDir(), "vsock")
	s.SiblingSocketDir = o.siblingDir()
	for _, d := range []string{o.WorkDir, s.CNIBinDir, s.VSOCKRoot, s.SiblingSocketDir} {
		if d == "" {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create %s: %w", d, err)
		}
	}
	for _, b := range o.Bridges {
		s.state.Bridges = append(s.state.Bridges, stateBridge{Name: b.Bridge, Datapath: string(b.Datapath)})
	}
	if err := runstate.Save(o.statePath(), s.state); err != nil {
		return nil, err
	}

	if s.Env, err = testenv.Start(testenv.Options{AssetsDir: o.BinDir}); err != nil {
		return nil, err
	}
	s.Client = s.Env.Client
	s.recordControlPlane()
	s.Kubeconfig = filepath.Join(o.WorkDir, "kubeconfig")
	if err := s.Env.KubeconfigFile(s.Kubeconfig); err != nil {
		return nil, err
	}

	s.AgentLog = filepath.Join(o.WorkDir, "fastpath-agent.log")
	s.OperatorLog = filepath.Join(o.WorkDir, "fastpath-operator.log")
	for _, f := range []string{s.AgentLog, s.OperatorLog} {
		_ = os.Remove(f)
	}
	agentArgs := []string{
		"--kubeconfig", s.Kubeconfig,
		"--node-name", s.NodeName,
		"--vsock-transport", "unix:" + s.VSOCKRoot,
		"--cni-bin-dir", s.CNIBinDir,
		"--cni-bin-source", filepath.Join(o.BinDir, "fastpath"),
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
	}
	if s.SiblingSocketDir != "" {
		// Real guests: the node can do vsock mode Sibling.
		// No kubelet here: the emulated launchers use the socket directory
		// directly, so the agent offers no device plugin (it would try to
		// register vsock.fastpath.io/sibling with whatever kubelet runs on
		// the host).
		agentArgs = append(agentArgs, "--vhost-device-vsock", filepath.Join(o.BinDir, "vhost-device-vsock"), "--sibling-socket-dir", s.SiblingSocketDir,
			"--device-plugin-dir", "")
	}
	if s.agent, err = s.startChild("fastpath-agent", s.AgentLog, agentArgs...); err != nil {
		return nil, err
	}
	// The operator registers Fastpath's binding plugins in the emulated
	// KubeVirt CR, which the emulator creates, as the chart has it do.
	args := []string{"--kubeconfig", s.Kubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--register-binding-plugins", "--domain-hook-image", emulation.EmulatedDomainHookImage}
	if o.PodCIDR.IsValid() {
		args = append(args, "--pod-network-cidr", o.PodCIDR.String())
	}
	if o.RunnerImage != "" {
		args = append(args, "--runner-image", o.RunnerImage)
	}
	if s.operator, err = s.startChild("fastpath-operator", s.OperatorLog, args...); err != nil {
		return nil, err
	}

	eo := o.emulationOptions()
	eo.Config = s.Env.Config
	eo.NodeName = s.NodeName
	eo.RestartWhenRequired = true
	if s.Emulator, err = emulation.New(eo); err != nil {
		return nil, err
	}
	if err := s.Emulator.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// startChild starts BinDir/name with args and records it in the run state.
func (s *Stack) startChild(name, log string, args ...string) (*process, error) {
	bin := filepath.Join(s.opts.BinDir, name)
	p, err := startProcess(name, append([]string{bin}, args...), []string{"KUBECONFIG=" + s.Kubeconfig}, log)
	if err != nil {
		return nil, err
	}
	s.record(name, p.cmd.Process.Pid)
	if err := runstate.Save(s.opts.statePath(), s.state); err != nil {
		_ = p.stop(time.Second)
		return nil, err
	}
	return p, nil
}

// record adds the live pid to the run state under name (a process that is
// already gone is not recorded: there is nothing to clean up).
func (s *Stack) record(name string, pid int) {
	if p, ok := runstate.Record(name, pid); ok {
		s.state.Processes = append(s.state.Processes, p)
	}
}

// recordControlPlane records the PIDs of the kube-apiserver and etcd envtest
// started (found by their listening ports), so that a later run can kill
// them if this one is killed: envtest starts them in their own process group.
func (s *Stack) recordControlPlane() {
	u, err := url.Parse(s.Env.Config.Host)
	if err != nil {
		return
	}
	port, _ := strconv.Atoi(u.Port())
	for _, pid := range listenerPIDs(port) {
		s.record("kube-apiserver", pid)
		s.recordDirs(pid)
		for _, arg := range cmdlineOf(pid) {
			v, ok := strings.CutPrefix(arg, "--etcd-servers=")
			if !ok {
				continue
			}
			if eu, err := url.Parse(strings.Split(v, ",")[0]); err == nil {
				ep, _ := strconv.Atoi(eu.Port())
				for _, epid := range listenerPIDs(ep) {
					s.record("etcd", epid)
					s.recordDirs(epid)
				}
			}
		}
	}
	_ = runstate.Save(s.opts.statePath(), s.state)
}

// recordDirs records the --cert-dir and --data-dir of a control plane process.
func (s *Stack) recordDirs(pid int) {
	for _, arg := range cmdlineOf(pid) {
		for _, flag := range []string{"--cert-dir=", "--data-dir="} {
			if v, ok := strings.CutPrefix(arg, flag); ok && v != "" {
				s.state.Dirs = append(s.state.Dirs, v)
			}
		}
	}
}

func cmdlineOf(pid int) []string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Split(string(b), "\x00")
}

// CheckProcesses returns an error naming the operator or agent if one has
// exited (with the end of its log).
func (s *Stack) CheckProcesses() error {
	for _, p := range []struct {
		p   *process
		log string
	}{{s.agent, s.AgentLog}, {s.operator, s.OperatorLog}} {
		if p.p == nil {
			continue
		}
		if done, err := p.p.exited(); done {
			return fmt.Errorf("%s exited (%v); end of %s:\n%s", p.p.name, err, p.log, logTail(p.log, 15))
		}
	}
	return nil
}

// Stop tears everything down in order: the emulation (CNI DEL while the
// bridge still exists), the operator, the agent, the bridges, the control
// plane and WorkDir/run. It returns every error but always does every step.
func (s *Stack) Stop() error {
	var errs []error
	if s.Emulator != nil {
		if err := s.Emulator.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, p := range []*process{s.operator, s.agent} {
		if err := p.stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// The agent stops its vhost-device-vsock processes when it exits; one
	// it could not stop is an error, and is killed.
	for _, pid := range siblingBackendPIDs(s.SiblingSocketDir) {
		errs = append(errs, fmt.Errorf("vhost-device-vsock (pid %d) outlived the agent: killed", pid))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, b := range s.state.Bridges {
		if err := deleteBridge(b); err != nil {
			errs = append(errs, err)
		}
	}
	if s.Env != nil {
		if err := s.Env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("failed to stop the control plane: %w", err))
		}
	}
	if err := os.RemoveAll(s.opts.runDir()); err != nil {
		errs = append(errs, err)
	}
	if err := os.Remove(s.opts.statePath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	if s.lock != nil {
		_ = s.lock.Close() // releases the flock
	}
	return errors.Join(errs...)
}

// lockWorkDir takes an exclusive flock on WorkDir/state/lock, so that a
// second run with the same WorkDir does not take the first for leftovers. The
// kernel releases it when the process ends, however it ends.
func lockWorkDir(dir string) (*os.File, error) {
	p := filepath.Join(dir, "state", "lock")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", filepath.Dir(p), err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		_ = f.Close()
		return nil, fmt.Errorf("failed to lock %s: another run uses %s (pid %s): %w", p, dir, strings.TrimSpace(string(holder)), err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// logTail returns the last n lines of a file.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  | " + strings.Join(lines, "\n  | ")
}

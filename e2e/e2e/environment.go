package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/demo"
	"github.com/fastpath-io/fastpath/e2e/localenv/emulation"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
	"github.com/fastpath-io/fastpath/internal/platform/apiprobe"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
)

// Environment is where the suite runs: the local stack or a real cluster.
type Environment interface {
	// Name says which, for the report.
	Name() string
	// Client is an admin client.
	Client() client.Client
	// Emulated is true for the local stack.
	Emulated() bool
	// KubeVirt is true when VMs can run: KubeVirt's API is served (the local
	// stack's is emulated); false on a cluster without KubeVirt, where the VM
	// specs are skipped.
	KubeVirt() bool
	// GuestExec runs a shell command line in the guest of the VM key and
	// returns its combined output; stdin may be "".
	GuestExec(ctx context.Context, key types.NamespacedName, stdin, command string) (string, error)
	// LauncherExec runs a shell command line in the virt-launcher pod of the
	// VM key (its compute container on a cluster).
	LauncherExec(ctx context.Context, key types.NamespacedName, command string) (string, error)
	// VSOCKServe makes the guest of key answer each connection on vsock
	// port with "<vm> ok <first line received>".
	// Stop ends it and frees the port (the vsock benchmark's server listens on
	// the same port afterwards).
	VSOCKServe(ctx context.Context, key types.NamespacedName, port uint32) (stop func(context.Context) error, err error)
	// VSOCKRequest dials (cid, port) from the guest of key, sends msg and
	// returns the reply: "" when the peer closed without answering, an error
	// when the connection could not be made.
	VSOCKRequest(ctx context.Context, key types.NamespacedName, cid, port uint32, msg string) (string, error)
	// VSOCKMode is the vsock mode of the suite's attachment: Relay where a
	// VM with KubeVirt's kernel vsock device can start, Sibling (vhost-user,
	// served by the agent's vhost-device-vsock) where the node offers no
	// devices.kubevirt.io/vhost-vsock, as on a kernel without vhost_vsock.
	VSOCKMode() fastpathv1alpha1.VSOCKMode
	// Stop releases the environment.
	Stop() error
}

// localEnv is the Stack of e2e/localenv/demo (emulated KubeVirt).
type localEnv struct {
	stack *demo.Stack
	// real is true with FASTPATH_GUESTS=qemu: the guests are REAL VMs
	// (e2e/localenv/guests), reached through their control channel.
	real bool
}

// GuestsEnv selects the local guests: "netns" (default) or "qemu".
const GuestsEnv = "FASTPATH_GUESTS"

// Local bridge, subnet and prefixes of the suite: distinct from the demo's so
// both can run on one machine.
const (
	localBridge = "fpe2e0"
	localSubnet = "10.249.0.0/24"
)

func startLocal(ctx context.Context, root, ns string, out io.Writer) (*localEnv, error) {
	mtu := int32(9000)
	bin := os.Getenv("FASTPATH_BIN_DIR")
	if bin == "" {
		bin = filepath.Join(root, "bin")
	}
	s, err := demo.StartStack(ctx, demo.StackOptions{
		BinDir:       bin,
		WorkDir:      filepath.Join(root, "_out", "e2e"),
		Namespaces:   []string{ns},
		NetNSPrefix:  "fpe2e-",
		HostIfPrefix: "fpev",
		PodCIDR:      netip.MustParsePrefix("10.244.251.0/24"),
		Bridges:      []fastpathv1alpha1.NetworkSpec{{Bridge: localBridge, Datapath: fastpathv1alpha1.DatapathLinuxBridge, MTU: &mtu}},
		RunnerImage:  "ghcr.io/fastpath-io/fastpath:e2e",
		Guests:       os.Getenv(GuestsEnv),
		Out:          out,
	})
	if err != nil {
		return nil, err
	}
	return &localEnv{stack: s, real: os.Getenv(GuestsEnv) == emulation.GuestsQEMU}, nil
}

// RealGuests reports whether the guests are real VMs.
func (l *localEnv) RealGuests() bool { return l.real }

func (l *localEnv) Name() string {
	if l.real {
		return "local: embedded control plane, real operator and agent, EMULATED KubeVirt/Multus/kubelet, REAL VMs (QEMU TCG, no KVM)"
	}
	return "local: embedded control plane, real operator and agent, EMULATED KubeVirt/Multus/kubelet"
}
func (l *localEnv) Client() client.Client { return l.stack.Client }
func (l *localEnv) Emulated() bool        { return true }
func (l *localEnv) KubeVirt() bool        { return true }
func (l *localEnv) Stop() error           { return l.stack.Stop() }

// VSOCKMode is Relay: the local stack's relay runs over its EMULATED
// UNIX-socket transport.
func (l *localEnv) VSOCKMode() fastpathv1alpha1.VSOCKMode { return fastpathv1alpha1.VSOCKModeRelay }

func (l *localEnv) GuestExec(ctx context.Context, key types.NamespacedName, stdin, command string) (string, error) {
	g, ok := l.stack.Emulator.Guest(key)
	if !ok {
		return "", fmt.Errorf("failed to run %q in %s: no running guest", command, key)
	}
	if g.Real != nil {
		line := command
		if stdin != "" {
			line = fmt.Sprintf("printf %%s %s | base64 -d | { %s; }", base64.StdEncoding.EncodeToString([]byte(stdin)), command)
		}
		out, rc, err := g.Real.Run(ctx, line)
		if err == nil && rc != 0 {
			err = fmt.Errorf("failed to run %q in the real guest %s: exit status %d", command, key, rc)
		}
		return out, err
	}
	return netnsExec(ctx, g.NetNS.Name, stdin, command)
}

func (l *localEnv) LauncherExec(ctx context.Context, key types.NamespacedName, command string) (string, error) {
	g, ok := l.stack.Emulator.Guest(key)
	if !ok {
		return "", fmt.Errorf("failed to run %q in the launcher of %s: no running VMI", command, key)
	}
	return netnsExec(ctx, g.Launcher.Name, "", command)
}

// netnsExec runs command with /bin/sh in the named namespace through `ip
// netns exec`, which also mounts the namespace's own /sys.
func netnsExec(ctx context.Context, name, stdin, command string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", name, "/bin/sh", "-c", command)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("failed to run %q in network namespace %s: %w", command, name, err)
	}
	return string(out), nil
}

func (l *localEnv) VSOCKServe(ctx context.Context, key types.NamespacedName, port uint32) (func(context.Context) error, error) {
	if l.real {
		return socatServe(ctx, l, key, port)
	}
	t, err := l.stack.Emulator.VSOCK(key)
	if err != nil {
		return nil, err
	}
	ln, err := t.Listen(port)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on vsock port %d in %s: %w", port, key, err)
	}
	emulation.ServeLines(ln, func(line string, _ uint32) string { return key.Name + " ok " + line })
	return func(context.Context) error { return ln.Close() }, nil
}

func (l *localEnv) VSOCKRequest(ctx context.Context, key types.NamespacedName, cid, port uint32, msg string) (string, error) {
	if l.real {
		return socatRequest(ctx, l, key, cid, port, msg)
	}
	t, err := l.stack.Emulator.VSOCK(key)
	if err != nil {
		return "", err
	}
	return emulation.RequestLine(ctx, t, cid, port, msg)
}

// clusterEnv is a real cluster reached through KUBECONFIG.
type clusterEnv struct {
	c        client.Client
	host     string
	keyFile  string
	user     string
	kubevirt bool
	// vsockMode is Relay when a node offers KubeVirt's vhost-vsock device
	// resource, else Sibling.
	vsockMode fastpathv1alpha1.VSOCKMode
}

// NoKubeVirt is the reason the VM specs give when they are not run (see
// notRun).
const NoKubeVirt = "KubeVirt is not installed on this cluster (the API server serves no kubevirt.io/v1 VirtualMachines), so no VM can run (make e2e-cluster's cluster has none unless KUBEVIRT=1)"

func startCluster(ctx context.Context, keyFile, user string) (*clusterEnv, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load KUBECONFIG: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: fpscheme.New()})
	if err != nil {
		return nil, fmt.Errorf("failed to create client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create a discovery client: %w", err)
	}
	kv, err := apiprobe.Served(disc, kubevirtv1.GroupVersion.String(), "virtualmachines", "virtualmachineinstances")
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("virtctl"); kv && err != nil {
		return nil, fmt.Errorf("failed to find virtctl on PATH: the cluster suite runs guest commands with `virtctl ssh` (make setup-kubevirt builds it into bin/kubevirt/<version>/): %w", err)
	}
	mode := fastpathv1alpha1.VSOCKModeRelay
	if kv {
		if mode, err = clusterVSOCKMode(ctx, c); err != nil {
			return nil, err
		}
	}
	return &clusterEnv{c: c, host: cfg.Host, keyFile: keyFile, user: user, kubevirt: kv, vsockMode: mode}, nil
}

// VhostVSOCKResource is the extended resource virt-handler's device plugin
// offers for /dev/vhost-vsock (KubeVirt pkg/virt-handler/device-manager);
// a VMI with autoattachVSOCK requests one.
const VhostVSOCKResource corev1.ResourceName = "devices.kubevirt.io/vhost-vsock"

// clusterVSOCKMode is Relay when some node has an allocatable
// VhostVSOCKResource, else Sibling: virt-handler offers none where
// /dev/vhost-vsock is missing, and a VMI with KubeVirt's kernel vsock device
// would stay Pending there.
func clusterVSOCKMode(ctx context.Context, c client.Client) (fastpathv1alpha1.VSOCKMode, error) {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return "", fmt.Errorf("failed to list nodes: %w", err)
	}
	for _, n := range nodes.Items {
		if q, ok := n.Status.Allocatable[VhostVSOCKResource]; ok && !q.IsZero() {
			return fastpathv1alpha1.VSOCKModeRelay, nil
		}
	}
	return fastpathv1alpha1.VSOCKModeSibling, nil
}

func (c *clusterEnv) Name() string {
	if !c.kubevirt {
		return "cluster " + c.host + " (real kubelet and Multus; NO KubeVirt: the VM specs are skipped)"
	}
	return "cluster " + c.host + " (real KubeVirt and Multus; vsock mode " + string(c.vsockMode) + ")"
}
func (c *clusterEnv) Client() client.Client { return c.c }
func (c *clusterEnv) Emulated() bool        { return false }
func (c *clusterEnv) KubeVirt() bool        { return c.kubevirt }
func (c *clusterEnv) Stop() error           { return nil }

func (c *clusterEnv) VSOCKMode() fastpathv1alpha1.VSOCKMode { return c.vsockMode }

// GuestExec runs command over `virtctl ssh`. A VMI is Ready before its
// guest's sshd listens (a TCG boot takes tens of seconds), so a dial that
// transientDial calls transient is tried again every 2 seconds for up to 3
// minutes; any other failure is returned at once.
func (c *clusterEnv) GuestExec(ctx context.Context, key types.NamespacedName, stdin, command string) (string, error) {
	booted, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		out, err := c.guestExecOnce(ctx, key, stdin, command)
		if err == nil || !transientDial(out) {
			return out, err
		}
		select {
		case <-booted.Done():
			return out, fmt.Errorf("%w (the guest's sshd could not be reached for 3 minutes; the last dial: %s; %s; %s)",
				err, strings.TrimSpace(out), c.addresses(ctx, key), c.guestState(ctx, key))
		case <-time.After(2 * time.Second):
		}
	}
}

// transientDial reports whether virtctl ssh failed to reach a guest that is
// still coming up: its sshd not listening yet, or the VMI still reporting
// the address of the launcher pod it had before a restart.
func transientDial(out string) bool {
	for _, s := range []string{"connect: connection refused", "connect: no route to host"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// addresses says where virtctl ssh dials VMI key (virt-api dials the VMI's
// first reported interface address) against the launcher pods that exist
// and their addresses, and the VMI's migration state: a dial that never
// reaches the guest is explained by a reported address no running pod has.
func (c *clusterEnv) addresses(ctx context.Context, key types.NamespacedName) string {
	v := &kubevirtv1.VirtualMachineInstance{}
	if err := c.c.Get(ctx, key, v); err != nil {
		return fmt.Sprintf("VMI %s: %v", key, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "VMI %s on node %s, phase %s, interfaces", key, v.Status.NodeName, v.Status.Phase)
	for _, i := range v.Status.Interfaces {
		fmt.Fprintf(&b, " [%s %s %v]", i.Name, i.IP, i.IPs)
	}
	if m := v.Status.MigrationState; m != nil {
		fmt.Fprintf(&b, "; migration %s: target pod %s on %s, completed %t, failed %t, reason %q",
			m.MigrationUID, m.TargetPod, m.TargetNode, m.Completed, m.Failed, m.FailureReason)
	}
	pods := &corev1.PodList{}
	if err := c.c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(v.UID)}); err != nil {
		fmt.Fprintf(&b, "; launcher pods: %v", err)
		return b.String()
	}
	b.WriteString("; launcher pods:")
	for _, p := range pods.Items {
		fmt.Fprintf(&b, " [%s on %s, %s, IP %s]", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
	}
	return b.String()
}

// guestState says what the guest of VMI key was doing when it could not be
// reached: the domain's state and reason and its interfaces' counters from
// libvirt in the launcher, and the tail of the guest's serial console (the
// launcher's guest-console-log container): a guest that stopped answering
// ARP on its masquerade interface shows there whether it was paused, had
// stopped taking packets (rx counters still) or logged a kernel fault.
func (c *clusterEnv) guestState(ctx context.Context, key types.NamespacedName) string {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var b strings.Builder
	virsh := "virsh -c 'qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock' "
	dom := key.Namespace + "_" + key.Name
	out, err := c.LauncherExec(ctx, key, virsh+"domstate --reason "+dom+"; "+virsh+"domiflist "+dom+
		" | awk 'NR > 2 && $1 != \"\" {print $1}' | while read i; do echo \"$i: $("+virsh+"domifstat "+dom+" $i | tr '\\n' ' ')\"; done")
	fmt.Fprintf(&b, "domain: %s", strings.Join(strings.Fields(out), " "))
	if err != nil {
		fmt.Fprintf(&b, " (%v)", err)
	}
	v := &kubevirtv1.VirtualMachineInstance{}
	if err := c.c.Get(ctx, key, v); err != nil {
		return b.String()
	}
	pods := &corev1.PodList{}
	if err := c.c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(v.UID)}); err != nil {
		return b.String()
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		log, err := exec.CommandContext(ctx, "kubectl", "logs", "-n", key.Namespace, p.Name, "-c", "guest-console-log", "--tail=40").CombinedOutput()
		fmt.Fprintf(&b, "; serial console of %s (last 40 lines, err %v):\n%s", p.Name, err, log)
	}
	return b.String()
}

func (c *clusterEnv) guestExecOnce(ctx context.Context, key types.NamespacedName, stdin, command string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "virtctl", "ssh", "--namespace", key.Namespace,
		"--identity-file", c.keyFile,
		"--local-ssh-opts=-o StrictHostKeyChecking=no", "--local-ssh-opts=-o UserKnownHostsFile=/dev/null",
		"--local-ssh-opts=-o LogLevel=ERROR", // no "Permanently added" warning in the output
		"--command", command, c.user+"@vmi/"+key.Name)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("failed to run %q in VM %s over virtctl ssh: %w", command, key, err)
	}
	return string(out), nil
}

// Restart restarts the VM key as its user would: `virtctl restart`.
func (c *clusterEnv) Restart(ctx context.Context, key types.NamespacedName) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "virtctl", "restart", "--namespace", key.Namespace, key.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("failed to restart VM %s with virtctl: %w: %s", key, err, out)
	}
	return nil
}

func (c *clusterEnv) LauncherExec(ctx context.Context, key types.NamespacedName, command string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := c.c.Get(ctx, key, vmi); err != nil {
		return "", fmt.Errorf("failed to get VMI %s: %w", key, err)
	}
	pods := &corev1.PodList{}
	if err := c.c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return "", fmt.Errorf("failed to list the virt-launcher pods of %s: %w", key, err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		out, err := exec.CommandContext(ctx, "kubectl", "exec", "-n", key.Namespace, p.Name, "-c", "compute", "--", "/bin/sh", "-c", command).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("failed to run %q in pod %s/%s: %w", command, key.Namespace, p.Name, err)
		}
		return string(out), nil
	}
	return "", fmt.Errorf("failed to find a running virt-launcher pod of %s", key)
}

func (c *clusterEnv) VSOCKServe(ctx context.Context, key types.NamespacedName, port uint32) (func(context.Context) error, error) {
	return socatServe(ctx, c, key, port)
}

func (c *clusterEnv) VSOCKRequest(ctx context.Context, key types.NamespacedName, cid, port uint32, msg string) (string, error) {
	return socatRequest(ctx, c, key, cid, port, msg)
}

// socatServe and socatRequest play VSOCKServe and VSOCKRequest with socat
// inside a real guest.
func socatServe(ctx context.Context, e Environment, key types.NamespacedName, port uint32) (func(context.Context) error, error) {
	pidFile := fmt.Sprintf("/tmp/fastpath-e2e-vsock-%d.pid", port)
	log := fmt.Sprintf("/tmp/fastpath-e2e-vsock-%d.log", port)
	cmd := fmt.Sprintf(`nohup socat -d -d VSOCK-LISTEN:%d,fork,reuseaddr SYSTEM:'read l; echo "%s ok $l"' >/dev/null 2>%s & echo $! >%s; %s`,
		port, key.Name, log, pidFile, guests.WaitListening(log))
	if out, err := e.GuestExec(ctx, key, "", cmd); err != nil {
		return nil, fmt.Errorf("failed to start socat on vsock port %d in %s: %w: %s", port, key, err, out)
	}
	return func(ctx context.Context) error {
		out, err := e.GuestExec(ctx, key, "", fmt.Sprintf("kill $(cat %s) && rm %s %s", pidFile, pidFile, log))
		if err != nil {
			return fmt.Errorf("failed to stop socat on vsock port %d in %s: %w: %s", port, key, err, out)
		}
		return nil
	}, nil
}

func socatRequest(ctx context.Context, e Environment, key types.NamespacedName, cid, port uint32, msg string) (string, error) {
	out, err := e.GuestExec(ctx, key, msg+"\n", fmt.Sprintf("socat -t 5 - VSOCK-CONNECT:%d:%d", cid, port))
	if err != nil {
		if strings.Contains(out, "Connection reset") || strings.Contains(out, "Connection refused") {
			return "", nil
		}
		return "", errors.New(strings.TrimSpace(out))
	}
	return out, nil
}

// keyPair writes a new ed25519 key pair into dir and returns the private key
// file and both keys' contents.
func keyPair(dir string) (string, []byte, []byte, error) {
	key := filepath.Join(dir, "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fastpath-e2e", "-f", key).CombinedOutput(); err != nil {
		return "", nil, nil, fmt.Errorf("failed to generate an SSH key: %w: %s", err, out)
	}
	priv, err := os.ReadFile(key)
	if err != nil {
		return "", nil, nil, err
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return "", nil, nil, err
	}
	return key, priv, pub, nil
}

package soak

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vsock"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// AgentOptions configures the agent part.
type AgentOptions struct {
	// Binary is the path of fastpath-agent; Plugin the CNI binary it installs.
	Binary, Plugin string
	// Backend is the path of fastpath-vsock-backend, which runs the vsock
	// relay (--relay) as a process of its own, as user backendUID, so that
	// the agent's kills leave the relayed connections alone (the agent gets
	// --relay-backend-socket). Required.
	Backend string
	// Rounds of bridge creation and relaying, each with kills; default 4.
	Rounds int
	// StreamKills is the number of agent kills of the streams phase, after
	// the rounds (runStreams: a TCP connection over the fast path and
	// relayed connections streaming through every kill); 0 skips it.
	StreamKills int
	// CNIPath holds host-local, for the streams phase's CNI ADDs; default
	// "/usr/lib/cni".
	CNIPath string
	// Bridges is the number of Linux bridges wanted anew per round; default 3.
	Bridges int
	// Seed, Deadline and Log are set by Run.
	Seed     uint64
	Deadline time.Time
	Log      logr.Logger
	// WorkDir holds the kubeconfig, the agent's and the backend's logs and
	// the CNI directory. The emulated vsock sockets and the backend's socket
	// directory are in a directory of their own under $TMPDIR, which the
	// backend's user can reach.
	WorkDir string
}

// backendUID is the user (and group) the vsock backend runs as, as in the
// chart.
const backendUID = 65532

// Emulated vsock addresses of the agent part (CIDs of VMs are >= 3).
const (
	agentNode      = "soak-node"
	relayPort      = 20001
	targetCID      = 100
	targetPort     = 5000
	allowedCID     = 101
	refusedCID     = 102
	agentPhaseWait = 2 * time.Minute
)

// agentRun is the state of one agent part.
type agentRun struct {
	o       AgentOptions
	cl      *cluster
	ns      string
	t       *tally
	rng     *rand.Rand
	agent   *process
	backend *process
	vsockFS string
	// backendSocket is the backend's control socket.
	backendSocket string
	bridges       []string // every bridge the part asked for
	prefix        string
}

// RunAgent runs the agent part on an embedded control plane with
// fastpath-agent as a separate process whose vsock relay runs in
// fastpath-vsock-backend, a process of its own (user 65532) that the part
// never kills, over the UNIX-socket EMULATION of AF_VSOCK
// (vsock.UnixTransport; nothing touches /dev/vsock).
// One attachment's status routes relay port 20001 to an echo server at
// emulated CID 100, allowing CID 101. Each round (a cycle) first creates
// attachments wanting o.Bridges new Linux bridges and SIGKILLs the agent at
// a random point while it creates them, then SIGKILLs it while a stream from
// CID 101 is carried by the relay. After each restart: every wanted bridge
// exists once with MTU 9000 and FastPathNode BridgesReady is True, a new
// stream from CID 101 echoes, and CID 102 is still refused. Bridges the part
// created are deleted at the end (the agent never deletes bridges). With
// o.StreamKills it then runs the streams phase (runStreams), whose summary
// ("agent/streams") follows the rounds' ("agent").
func RunAgent(ctx context.Context, o AgentOptions) ([]Summary, error) {
	if o.Rounds <= 0 {
		o.Rounds = 4
	}
	if o.CNIPath == "" {
		o.CNIPath = "/usr/lib/cni"
	}
	if o.Bridges <= 0 {
		o.Bridges = 3
	}
	if o.Backend == "" {
		return nil, fmt.Errorf("the agent part needs fastpath-vsock-backend (AgentOptions.Backend), which runs its relay")
	}
	start := time.Now()
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "fastpath-soak-agent-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		o.WorkDir = dir
	}
	cl, err := startCluster(o.WorkDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := cl.stop(); err != nil {
			o.Log.Error(err, "Failed to stop the control plane")
		}
	}()
	// The backend's user must reach the emulation and its socket directory:
	// not below WorkDir, which may be a test's 0700 directory.
	shared, err := os.MkdirTemp("", "fastpath-soak-vsock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(shared)
	r := &agentRun{o: o, cl: cl, t: &tally{s: Summary{Part: "agent"}, logf: func(f string, a ...any) { o.Log.Info(fmt.Sprintf(f, a...)) }},
		rng: rand.New(rand.NewPCG(o.Seed, 5)), vsockFS: filepath.Join(shared, "vsock"), prefix: fmt.Sprintf("fpsa%d", os.Getpid()%10000)}
	defer r.deleteBridges()
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	if err := r.startBackend(shared); err != nil {
		return nil, err
	}
	defer r.backend.kill()
	stopEcho, err := r.echoServer()
	if err != nil {
		return nil, err
	}
	defer stopEcho()
	cniDir := filepath.Join(o.WorkDir, "cni-bin")
	r.agent = &process{path: o.Binary, env: []string{"KUBECONFIG=" + cl.kubeconfig}, logPath: filepath.Join(o.WorkDir, "agent.log"),
		args: []string{"--node-name=" + agentNode, "--vsock-transport=unix:" + r.vsockFS, "--relay-backend-socket=" + r.backendSocket,
			"--cni-bin-dir=" + cniDir, "--cni-bin-source=" + o.Plugin, "--metrics-bind-address=0", "--health-probe-bind-address=0"}}
	if err := r.agent.start(); err != nil {
		return nil, err
	}
	defer r.agent.kill()
	if err := r.waitRelay(ctx); err != nil {
		return nil, fmt.Errorf("the relay never served the route before any fault: %w", err)
	}

	kills := 0
	for round := 0; round < o.Rounds; round++ {
		if round > 0 && (ctx.Err() != nil || (!o.Deadline.IsZero() && time.Now().After(o.Deadline))) {
			r.t.mu.Lock()
			r.t.s.Notes = append(r.t.s.Notes, fmt.Sprintf("stopped by the deadline after %d rounds", round))
			r.t.mu.Unlock()
			break
		}
		k, err := r.bridgeRound(ctx, round)
		if err != nil {
			return []Summary{r.t.summary()}, err
		}
		kills += k
		k, err = r.relayRound(ctx)
		if err != nil {
			return []Summary{r.t.summary()}, err
		}
		kills += k
		r.t.cycle()
		s := r.t.summary()
		o.Log.Info(fmt.Sprintf("agent round %d: faults=%d survived=%d lost=%d leaked=%d", round, s.Faults, s.Survived, s.Lost, s.Leaked))
	}
	s := r.t.summary()
	s.Duration = time.Since(start)
	s.Notes = append(s.Notes, fmt.Sprintf("%d agent kills", kills), fmt.Sprintf("%d bridges", len(r.bridges)),
		"vsock EMULATED over UNIX sockets; the relay runs in fastpath-vsock-backend, never killed")
	if !r.backend.running() {
		s.Problems = append(s.Problems, "the vsock backend exited during the rounds (see backend.log)")
	}
	out := []Summary{s}
	if o.StreamKills > 0 {
		ss, err := r.runStreams(ctx)
		out = append(out, ss)
		if err != nil {
			return out, fmt.Errorf("streams phase: %w", err)
		}
	}
	return out, nil
}

// setup creates the Node, the namespace and the relay attachment with its
// route in status (written here as the operator would: no operator runs).
func (r *agentRun) setup(ctx context.Context) error {
	if err := r.cl.c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: agentNode}}); err != nil {
		return fmt.Errorf("failed to create node %s: %w", agentNode, err)
	}
	var err error
	if r.ns, err = r.cl.newNamespace(ctx, "soak-agent"); err != nil {
		return err
	}
	att := &v1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "relay"},
		Spec: v1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "soak"}},
			VSOCK:      &v1alpha1.VSOCKSpec{Services: []v1alpha1.VSOCKService{{Name: "echo", VM: "target", Port: targetPort}}},
		},
	}
	if err := r.cl.c.Create(ctx, att); err != nil {
		return fmt.Errorf("failed to create the relay attachment: %w", err)
	}
	att.Status.VSOCKServices = []v1alpha1.VSOCKServiceStatus{{Name: "echo", VM: "target", Port: targetPort, RelayPort: relayPort,
		Node: agentNode, TargetCID: ptr.To(int64(targetCID)), AllowedCIDs: []int64{allowedCID}}}
	if err := r.cl.c.Status().Update(ctx, att); err != nil {
		return fmt.Errorf("failed to write the relay attachment's status: %w", err)
	}
	return nil
}

// startBackend prepares the backend's socket directory and the emulation's
// root under shared for user backendUID and starts fastpath-vsock-backend
// --relay there, waiting until its control socket exists.
func (r *agentRun) startBackend(shared string) error {
	if err := os.Chmod(shared, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(r.vsockFS, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(r.vsockFS, 0o777); err != nil { // past the umask
		return err
	}
	dir := filepath.Join(shared, "backend")
	r.backendSocket = filepath.Join(dir, "control.sock")
	// As the agent does in a cluster (--relay-backend-gid).
	if err := backend.PrepareSocketDir(dir, backendUID); err != nil {
		return fmt.Errorf("failed to prepare the vsock backend's socket directory: %w", err)
	}
	r.backend = &process{path: r.o.Backend, logPath: filepath.Join(r.o.WorkDir, "backend.log"),
		cred: &syscall.Credential{Uid: backendUID, Gid: backendUID, Groups: []uint32{}},
		args: []string{"--socket-dir=" + dir, "--vhost-device-vsock=", "--relay", "--vsock-transport=unix:" + r.vsockFS}}
	if err := r.backend.start(); err != nil {
		return err
	}
	deadline := time.Now().Add(agentPhaseWait)
	for {
		if _, err := os.Stat(r.backendSocket); err == nil {
			return nil
		}
		if !r.backend.running() || time.Now().After(deadline) {
			return fmt.Errorf("the vsock backend did not serve %s (see %s)", r.backendSocket, r.backend.logPath)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// echoServer listens at (targetCID, targetPort) and echoes every stream.
func (r *agentRun) echoServer() (stop func(), err error) {
	tr := vsock.NewUnixTransport(r.vsockFS, targetCID)
	ln, err := tr.Listen(targetPort)
	if err != nil {
		return nil, fmt.Errorf("failed to listen as the emulated guest: %w", err)
	}
	// The relay dials it as the backend's user.
	if err := os.Chmod(tr.SocketPath(targetCID, targetPort), 0o777); err != nil {
		ln.Close()
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return func() { ln.Close() }, nil
}

// echo dials the relay from cid and checks that n random bytes come back.
func (r *agentRun) echo(ctx context.Context, cid uint32, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := vsock.NewUnixTransport(r.vsockFS, cid).Dial(ctx, vsock.HostCID, relayPort)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	out := make([]byte, n)
	_, _ = crand.Read(out)
	go func() { _, _ = c.Write(out) }()
	in := make([]byte, n)
	if _, err := io.ReadFull(c, in); err != nil {
		return fmt.Errorf("failed to read the echo: %w", err)
	}
	if !bytes.Equal(in, out) {
		return fmt.Errorf("the echo differs from what was sent")
	}
	return nil
}

// waitRelay waits until a stream from the allowed CID echoes.
func (r *agentRun) waitRelay(ctx context.Context) error {
	deadline := time.Now().Add(agentPhaseWait)
	for {
		err := r.echo(ctx, allowedCID, 64<<10)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// relayRound streams from the allowed CID, kills the agent while bytes
// flow, restarts it and checks that the route is still served for the
// allowed CID and stays refused for another (the relay lives in the
// backend; the streams phase checks the stream itself across kills).
func (r *agentRun) relayRound(ctx context.Context) (int, error) {
	// The bridge round's kill must not have lost the route either.
	if err := r.waitRelay(ctx); err != nil {
		r.t.lost(fmt.Sprintf("relay route did not come back after the bridge round's agent kill: %v", err))
		return 0, nil
	}
	c, err := vsock.NewUnixTransport(r.vsockFS, allowedCID).Dial(ctx, vsock.HostCID, relayPort)
	if err != nil {
		r.t.lost(fmt.Sprintf("relay stream could not start: %v", err))
		return 0, nil
	}
	var carried atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 32<<10)
		back := make([]byte, len(buf))
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
			if _, err := io.ReadFull(c, back); err != nil {
				return
			}
			carried.Add(int64(len(buf)))
		}
	}()
	time.Sleep(time.Duration(100+r.rng.IntN(400)) * time.Millisecond)
	before := carried.Load()
	r.agent.kill()
	time.Sleep(time.Duration(r.rng.IntN(500)) * time.Millisecond)
	if err := r.agent.start(); err != nil {
		return 1, err
	}
	c.Close()
	<-done
	if before == 0 {
		r.t.lost("the relay carried nothing before the kill")
	}
	err = r.waitRelay(ctx)
	refused := r.echo(ctx, refusedCID, 1024)
	r.t.fault(err == nil && refused != nil, fmt.Sprintf("relay after an agent kill while it carried %d bytes: allowed CID %d: %v; CID %d refused: %v",
		before, allowedCID, err, refusedCID, refused != nil))
	return 1, nil
}

// bridgeRound creates attachments wanting o.Bridges new bridges, kills the
// agent at a random point while it creates them, restarts it and checks the
// bridges and the FastPathNode.
func (r *agentRun) bridgeRound(ctx context.Context, round int) (int, error) {
	var names []string
	for i := range r.o.Bridges {
		name := r.prefix + strconv.Itoa(round) + strconv.Itoa(i)
		names = append(names, name)
		// The agent makes the bridges of admin-owned FastPathNetworks; an
		// attachment only names one.
		fpnet := &v1alpha1.FastPathNetwork{
			ObjectMeta: metav1.ObjectMeta{Name: "br-" + name},
			Spec: v1alpha1.FastPathNetworkSpec{Datapath: v1alpha1.DatapathLinuxBridge, Bridge: name,
				MTU:               &v1alpha1.MTURange{Max: ptr.To(int32(9000))},
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: r.ns}}},
		}
		if err := r.cl.c.Create(ctx, fpnet); err != nil {
			return 0, fmt.Errorf("failed to create FastPathNetwork %s: %w", fpnet.Name, err)
		}
		att := &v1alpha1.FastPathAttachment{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "br-" + name},
			Spec: v1alpha1.FastPathAttachmentSpec{
				VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}},
				NetworkRef: &v1alpha1.NetworkReference{Name: fpnet.Name},
				Network:    &v1alpha1.NetworkSpec{MTU: ptr.To(int32(9000)), IPAM: v1alpha1.IPAMSpec{Subnet: "10.252.0.0/24"}},
			},
		}
		if err := r.cl.c.Create(ctx, att); err != nil {
			return 0, fmt.Errorf("failed to create attachment %s: %w", att.Name, err)
		}
	}
	r.bridges = append(r.bridges, names...)
	time.Sleep(time.Duration(r.rng.IntN(60)) * time.Millisecond)
	done, _ := r.bridgesOK(ctx, false)
	inProgress := !done
	r.agent.kill()
	time.Sleep(time.Duration(r.rng.IntN(500)) * time.Millisecond)
	if err := r.agent.start(); err != nil {
		return 1, err
	}
	// The FastPathNode may still show what the killed agent wrote: wait
	// until the state has held for a second and a half.
	deadline := time.Now().Add(agentPhaseWait)
	for held := 0; held < 3 && time.Now().Before(deadline); {
		if ok, _ := r.bridgesOK(ctx, false); ok {
			held++
		} else {
			held = 0
		}
		time.Sleep(500 * time.Millisecond)
	}
	ok, why := r.bridgesOK(ctx, true)
	if inProgress {
		r.t.fault(ok, fmt.Sprintf("bridges of round %d after an agent kill while it created them: %s", round, why))
	} else if !ok {
		r.t.lost(fmt.Sprintf("bridges of round %d after an agent kill: %s", round, why))
	}
	r.t.mu.Lock()
	if !inProgress {
		r.t.s.Notes = append(r.t.s.Notes, fmt.Sprintf("round %d: bridges were done before the kill", round))
	}
	r.t.mu.Unlock()
	return 1, nil
}

// bridgesOK reports whether every bridge asked for exists as a Linux bridge
// with MTU 9000, no other bridge with the part's prefix exists, and the
// FastPathNode says BridgesReady True listing them all; with final it
// counts what is wrong. why says what is not as it must be.
func (r *agentRun) bridgesOK(ctx context.Context, final bool) (ok bool, why string) {
	links, err := netlink.LinkList()
	if err != nil {
		return false, err.Error()
	}
	found := map[string]int{}
	for _, l := range links {
		if len(l.Attrs().Name) >= len(r.prefix) && l.Attrs().Name[:len(r.prefix)] == r.prefix {
			if _, isBridge := l.(*netlink.Bridge); isBridge && l.Attrs().MTU == 9000 {
				found[l.Attrs().Name]++
			} else {
				found[l.Attrs().Name] += 100 // a wrong kind or MTU
			}
		}
	}
	bad := 0
	for _, b := range r.bridges {
		if found[b] != 1 {
			bad++
			if final {
				r.t.lost(fmt.Sprintf("bridge %s: %d links of that name as wanted (want 1; 100+ means a wrong type or MTU)", b, found[b]))
			}
		}
		delete(found, b)
	}
	if final && len(found) > 0 {
		r.t.leaked(len(found), fmt.Sprintf("bridges nobody asked for: %v", found))
	}
	fpn := &v1alpha1.FastPathNode{}
	if err := r.cl.c.Get(ctx, types.NamespacedName{Name: agentNode}, fpn); err != nil {
		return false, err.Error()
	}
	c := meta.FindStatusCondition(fpn.Status.Conditions, v1alpha1.BridgesReadyCondition)
	listed := map[string]bool{}
	for _, b := range fpn.Status.Bridges {
		if b.Ready {
			listed[b.Name] = true
		}
	}
	var unlisted []string
	for _, b := range r.bridges {
		if !listed[b] {
			unlisted = append(unlisted, b)
		}
	}
	cond := "no BridgesReady condition"
	if c != nil {
		cond = fmt.Sprintf("BridgesReady=%s/%s %q", c.Status, c.Reason, c.Message)
	}
	why = fmt.Sprintf("%d bridges wrong on the node, %d unknown, FastPathNode lists %d of %d ready, %s",
		bad, len(found), len(r.bridges)-len(unlisted), len(r.bridges), cond)
	return bad == 0 && len(found) == 0 && len(unlisted) == 0 && c != nil && c.Status == metav1.ConditionTrue, why
}

// deleteBridges deletes every bridge the part asked for.
func (r *agentRun) deleteBridges() {
	for _, b := range r.bridges {
		if l, err := netlink.LinkByName(b); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				r.o.Log.Error(err, "Failed to delete bridge", "bridge", b)
			}
		}
	}
}

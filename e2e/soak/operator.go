package soak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/emulation"
)

// OperatorOptions configures the operator part.
type OperatorOptions struct {
	// Binary is the path of fastpath-operator.
	Binary string
	// VMs is the number of VirtualMachines the attachment selects; default 300.
	VMs int
	// Rounds is the number of wire-and-unwire rounds with kills; a first
	// round without kills measures the phases. Default 4.
	Rounds int
	// KillsPerPhase is the most kills per wiring or unwiring phase; a kill
	// is sent only while the phase is still under way. Default 3.
	KillsPerPhase int
	// PhaseTimeout bounds each phase; default 5 minutes.
	PhaseTimeout time.Duration
	// Seed, Deadline and Log are set by Run.
	Seed     uint64
	Deadline time.Time
	Log      logr.Logger
	// WorkDir holds the kubeconfig and the operator's log.
	WorkDir string
}

const soakAttachment = "soak"

// operatorRun is the state of one operator part.
type operatorRun struct {
	o       OperatorOptions
	cl      *cluster
	ns      string
	start   time.Time
	t       *tally
	rng     *rand.Rand
	op      *process
	applied map[string]string // VM name -> its user view right after creation
}

// RunOperator runs the operator part on an embedded control plane
// (kube-apiserver and etcd; KubeVirt's CRDs, no KubeVirt): o.VMs VMs with
// their own interfaces, networks, annotations and affinity, one
// FastPathAttachment selecting all of them, created and deleted o.Rounds+1
// times while fastpath-operator runs as a separate process that is
// SIGKILLed at random points of wiring and unwiring and started again.
// After each wiring every VM carries the wiring exactly once and one NAD
// exists; after each deletion every VM's labels, annotations and spec are
// what the user created, byte for byte, and no NAD is left. Each round is a
// cycle; each kill that landed while a phase was under way is a fault,
// survived when the phase then completed with those checks passing.
func RunOperator(ctx context.Context, o OperatorOptions) (Summary, error) {
	r, cleanup, err := newOperatorRun(ctx, &o, "operator")
	if err != nil {
		return Summary{}, err
	}
	defer cleanup()
	kill := func() error {
		r.op.kill()
		time.Sleep(time.Duration(r.rng.Int64N(int64(500 * time.Millisecond))))
		return r.op.start()
	}
	return r.rounds(ctx, "operator kills", kill)
}

// newOperatorRun starts the control plane, creates the namespace and the
// VMs and starts the operator; cleanup stops both.
func newOperatorRun(ctx context.Context, o *OperatorOptions, part string) (*operatorRun, func(), error) {
	if o.VMs <= 0 {
		o.VMs = 300
	}
	if o.Rounds <= 0 {
		o.Rounds = 4
	}
	if o.KillsPerPhase <= 0 {
		o.KillsPerPhase = 3
	}
	if o.PhaseTimeout <= 0 {
		o.PhaseTimeout = 5 * time.Minute
	}
	var cleanups []func()
	cleanup := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "fastpath-soak-"+part+"-")
		if err != nil {
			return nil, nil, err
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		o.WorkDir = dir
	}
	cl, err := startCluster(o.WorkDir)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	cleanups = append(cleanups, func() {
		if err := cl.stop(); err != nil {
			o.Log.Error(err, "Failed to stop the control plane")
		}
	})
	r := &operatorRun{o: *o, cl: cl, t: &tally{s: Summary{Part: part}, logf: func(f string, a ...any) { o.Log.Info(fmt.Sprintf(f, a...)) }},
		rng: rand.New(rand.NewPCG(o.Seed, 3)), applied: map[string]string{}, start: time.Now()}
	if r.ns, err = cl.newNamespace(ctx, "soak"); err != nil {
		cleanup()
		return nil, nil, err
	}
	// The attachment uses the cluster's default FastPathNetwork, which
	// admits the soak's namespace.
	fpnet := &v1alpha1.FastPathNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "soak-" + r.ns, Annotations: map[string]string{v1alpha1.DefaultNetworkAnnotation: "true"}},
		Spec: v1alpha1.FastPathNetworkSpec{Datapath: v1alpha1.DatapathLinuxBridge, Bridge: "fastpath0",
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: r.ns}}},
	}
	if err := cl.c.Create(ctx, fpnet); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("failed to create FastPathNetwork %s: %w", fpnet.Name, err)
	}
	if err := emulation.RegisterBindingPlugins(ctx, cl.c); err != nil {
		cleanup()
		return nil, nil, err
	}
	if err := r.createVMs(ctx); err != nil {
		cleanup()
		return nil, nil, err
	}
	r.op = &process{path: o.Binary, env: []string{"KUBECONFIG=" + cl.kubeconfig},
		args: []string{"--metrics-bind-address=0", "--health-probe-bind-address=0"}, logPath: filepath.Join(o.WorkDir, part+".log")}
	if err := r.op.start(); err != nil {
		cleanup()
		return nil, nil, err
	}
	cleanups = append(cleanups, r.op.kill)
	return r, cleanup, nil
}

// rounds runs o.Rounds+1 wire-and-unwire rounds, the first without faults
// (it measures the phases), the others with up to o.KillsPerPhase calls of
// inject per phase at random points while the phase is under way. what
// names the faults in the summary.
func (r *operatorRun) rounds(ctx context.Context, what string, inject func() error) (Summary, error) {
	var wireTime, unwireTime, slowest time.Duration
	injected := 0
	for round := 0; round <= r.o.Rounds; round++ {
		if round > 0 && (ctx.Err() != nil || (!r.o.Deadline.IsZero() && time.Now().After(r.o.Deadline))) {
			r.t.mu.Lock()
			r.t.s.Notes = append(r.t.s.Notes, fmt.Sprintf("stopped by the deadline after %d rounds", round-1))
			r.t.mu.Unlock()
			break
		}
		n := r.o.KillsPerPhase
		if round == 0 {
			n = 0 // measure the phases first
		}
		d, k, err := r.phase(ctx, "wire", n, wireTime, inject, r.createAttachment, r.wired)
		if err != nil {
			return r.t.summary(), err
		}
		injected += k
		if round == 0 {
			wireTime = d
		}
		slowest = max(slowest, d)
		d, k, err = r.phase(ctx, "unwire", n, unwireTime, inject, r.deleteAttachment, r.restored)
		if err != nil {
			return r.t.summary(), err
		}
		injected += k
		if round == 0 {
			unwireTime = d
		}
		slowest = max(slowest, d)
		r.t.cycle()
		s := r.t.summary()
		r.o.Log.Info(fmt.Sprintf("%s round %d: faults=%d survived=%d lost=%d leaked=%d", s.Part, round, s.Faults, s.Survived, s.Lost, s.Leaked))
	}
	s := r.t.summary()
	s.Duration = time.Since(r.start)
	s.Notes = append(s.Notes, fmt.Sprintf("%d VMs", r.o.VMs), fmt.Sprintf("%d %s", injected, what),
		fmt.Sprintf("wire %s, unwire %s without faults, slowest phase %s", wireTime.Round(100*time.Millisecond),
			unwireTime.Round(100*time.Millisecond), slowest.Round(100*time.Millisecond)))
	return s, nil
}

// phase starts an operation (act), calls inject up to n times at random
// points while done reports it unfinished, then waits for done and runs
// its final check. base is the phase's time without faults (0: unknown).
// It returns the phase's duration and the faults injected.
func (r *operatorRun) phase(ctx context.Context, name string, n int, base time.Duration, inject func() error,
	act func(context.Context) error, done func(context.Context, bool) (bool, error)) (time.Duration, int, error) {
	start := time.Now()
	if err := act(ctx); err != nil {
		return 0, 0, err
	}
	if base <= 0 {
		base = 5 * time.Second
	}
	sent := 0
	for range n {
		time.Sleep(time.Duration(float64(base) * (0.05 + 0.6*r.rng.Float64())))
		if ok, _ := done(ctx, false); ok {
			break
		}
		sent++
		if err := inject(); err != nil {
			return 0, sent, err
		}
	}
	deadline := time.Now().Add(r.o.PhaseTimeout)
	var finished bool
	var lastErr error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		ok, err := done(ctx, false)
		if ok && err == nil {
			finished = true
			break
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	passed := false
	if finished {
		var err error
		passed, err = done(ctx, true)
		if err != nil {
			r.t.lost(fmt.Sprintf("%s: final check failed: %v", name, err))
		}
	} else {
		r.t.lost(fmt.Sprintf("%s did not finish within %s (last error %v)", name, r.o.PhaseTimeout, lastErr))
	}
	if !r.op.running() {
		r.t.lost(fmt.Sprintf("%s: the operator process exited", name))
		passed = false
		if err := r.op.start(); err != nil {
			return elapsed, sent, err
		}
	}
	for range sent {
		r.t.fault(passed, fmt.Sprintf("%s after a fault", name))
	}
	return elapsed, sent, nil
}

func (r *operatorRun) createAttachment(ctx context.Context) error {
	att := &v1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: soakAttachment},
		Spec: v1alpha1.FastPathAttachmentSpec{
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "soak"}},
			Network:    &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/22"}},
		},
	}
	return r.cl.c.Create(ctx, att)
}

func (r *operatorRun) deleteAttachment(ctx context.Context) error {
	att := &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: soakAttachment}}
	return r.cl.c.Delete(ctx, att)
}

// wired reports whether the attachment says every VM is wired; with final
// it also checks every VM on the API server (wiring present exactly once)
// and the NADs (exactly the attachment's), counting losses and leaks.
func (r *operatorRun) wired(ctx context.Context, final bool) (bool, error) {
	att := &v1alpha1.FastPathAttachment{}
	if err := r.cl.c.Get(ctx, types.NamespacedName{Namespace: r.ns, Name: soakAttachment}, att); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	c := meta.FindStatusCondition(att.Status.Conditions, v1alpha1.VMsWiredCondition)
	ok := c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == att.Generation && int(att.Status.WiredVMs) == r.o.VMs
	if !final || !ok {
		return ok, nil
	}
	vms, err := r.listVMs(ctx)
	if err != nil {
		return false, err
	}
	bad := 0
	name := v1alpha1.NetworkName(soakAttachment)
	for _, vm := range vms {
		labels, _, _ := unstructured.NestedStringMap(vm.Object, "spec", "template", "metadata", "labels")
		ifaces, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "domain", "devices", "interfaces")
		nets, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "networks")
		if labels[v1alpha1.AttachmentLabel] != soakAttachment || countNamed(ifaces, name) != 1 || countNamed(nets, name) != 1 {
			bad++
			if bad <= 5 {
				r.t.lost(fmt.Sprintf("VM %s after wiring: label %q, %d interfaces and %d networks named %s",
					vm.GetName(), labels[v1alpha1.AttachmentLabel], countNamed(ifaces, name), countNamed(nets, name), name))
			}
		}
	}
	if bad > 5 {
		r.t.mu.Lock()
		r.t.s.Lost += bad - 5
		r.t.mu.Unlock()
	}
	if bad > 0 {
		events := r.eventSummary(ctx)
		r.t.mu.Lock()
		r.t.problem(fmt.Sprintf("%d VMs not wired while the attachment (uid %s) says VMsWired %s/%s wiredVMs=%d; events: %s",
			bad, att.UID, c.Status, c.Reason, att.Status.WiredVMs, events))
		r.t.mu.Unlock()
	}
	nads, err := r.listNADs(ctx)
	if err != nil {
		return false, err
	}
	if len(nads) != 1 || nads[0] != soakAttachment {
		r.t.leaked(max(len(nads)-1, 0), fmt.Sprintf("NADs after wiring: %v, want [%s]", nads, soakAttachment))
		if len(nads) == 0 {
			r.t.lost("no NAD after wiring")
		}
		return false, nil
	}
	return bad == 0, nil
}

// restored reports whether the attachment is gone; with final it also
// checks that every VM is byte for byte what the user created and that no
// NAD is left.
func (r *operatorRun) restored(ctx context.Context, final bool) (bool, error) {
	err := r.cl.c.Get(ctx, types.NamespacedName{Namespace: r.ns, Name: soakAttachment}, &v1alpha1.FastPathAttachment{})
	if err == nil || client.IgnoreNotFound(err) != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !final {
		return true, nil
	}
	vms, err := r.listVMs(ctx)
	if err != nil {
		return false, err
	}
	bad := 0
	for _, vm := range vms {
		if got := userView(vm); got != r.applied[vm.GetName()] {
			bad++
			if bad <= 5 {
				r.t.lost(fmt.Sprintf("VM %s after unwiring differs from what the user created:\n got %s\nwant %s", vm.GetName(), got, r.applied[vm.GetName()]))
			}
		}
	}
	if bad > 5 {
		r.t.mu.Lock()
		r.t.s.Lost += bad - 5
		r.t.mu.Unlock()
	}
	nads, err := r.listNADs(ctx)
	if err != nil {
		return false, err
	}
	r.t.leaked(len(nads), fmt.Sprintf("orphan NADs after deletion: %v", nads))
	return bad == 0 && len(nads) == 0, nil
}

// eventSummary counts the namespace's Events by reason, for problem reports.
func (r *operatorRun) eventSummary(ctx context.Context) string {
	list := &corev1.EventList{}
	if err := r.cl.c.List(ctx, list, client.InNamespace(r.ns)); err != nil {
		return err.Error()
	}
	counts := map[string]int32{}
	for _, e := range list.Items {
		counts[e.Reason+"("+e.InvolvedObject.Kind+")"] += max(e.Count, 1)
	}
	return fmt.Sprint(counts)
}

// userView is what the user wrote of a VM: labels, annotations and spec, as
// canonical JSON.
func userView(vm unstructured.Unstructured) string {
	spec, _, _ := unstructured.NestedFieldNoCopy(vm.Object, "spec")
	data, _ := json.Marshal(map[string]any{"labels": vm.GetLabels(), "annotations": vm.GetAnnotations(), "spec": spec})
	return string(data)
}

func countNamed(list []any, name string) int {
	n := 0
	for _, item := range list {
		if m, ok := item.(map[string]any); ok && m["name"] == name {
			n++
		}
	}
	return n
}

func (r *operatorRun) listVMs(ctx context.Context) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("kubevirt.io/v1")
	list.SetKind("VirtualMachineList")
	if err := r.cl.c.List(ctx, list, client.InNamespace(r.ns)); err != nil {
		return nil, fmt.Errorf("failed to list VMs: %w", err)
	}
	if len(list.Items) != r.o.VMs {
		return nil, fmt.Errorf("listed %d VMs, want %d", len(list.Items), r.o.VMs)
	}
	return list.Items, nil
}

func (r *operatorRun) listNADs(ctx context.Context) ([]string, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("k8s.cni.cncf.io/v1")
	list.SetKind("NetworkAttachmentDefinitionList")
	if err := r.cl.c.List(ctx, list, client.InNamespace(r.ns)); err != nil {
		return nil, fmt.Errorf("failed to list NADs: %w", err)
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.GetName())
	}
	return names, nil
}

// createVMs creates o.VMs VMs as a user would write them (each with its
// own interfaces, networks, annotations and affinity) and records their
// user view.
func (r *operatorRun) createVMs(ctx context.Context) error {
	names := make(chan string)
	errs := make(chan error, r.o.VMs)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				vm := &unstructured.Unstructured{}
				if err := vm.UnmarshalJSON([]byte(fmt.Sprintf(userVM, name))); err != nil {
					errs <- err
					continue
				}
				vm.SetNamespace(r.ns)
				if err := r.cl.c.Create(ctx, vm); err != nil {
					errs <- fmt.Errorf("failed to create VM %s: %w", name, err)
					continue
				}
				mu.Lock()
				r.applied[name] = userView(*vm)
				mu.Unlock()
			}
		}()
	}
	for i := range r.o.VMs {
		names <- fmt.Sprintf("vm-%03d", i)
	}
	close(names)
	wg.Wait()
	close(errs)
	return <-errs
}

// userVM is a VM as a user writes it; %[1]s is its name.
const userVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
 "metadata":{"name":"%[1]s","labels":{"app":"soak"},"annotations":{"owner":"team-a"}},
 "spec":{"runStrategy":"Halted","template":{
  "metadata":{"labels":{"kubevirt.io/domain":"%[1]s"},"annotations":{"hooks.kubevirt.io/hookSidecars":"[]"}},
  "spec":{
   "domain":{"cpu":{"cores":4},"devices":{
     "disks":[{"name":"root","disk":{"bus":"virtio"}}],
     "interfaces":[{"name":"default","masquerade":{}},{"name":"storage","bridge":{},"macAddress":"02:00:00:00:00:01"}]},
    "resources":{"requests":{"memory":"2Gi","cpu":"1500m"}}},
   "networks":[{"name":"default","pod":{}},{"name":"storage","multus":{"networkName":"storage-net"}}],
   "affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[
     {"labelSelector":{"matchLabels":{"app":"cache"}},"topologyKey":"topology.kubernetes.io/zone"}]}},
   "terminationGracePeriodSeconds":0,
   "volumes":[{"name":"root","containerDisk":{"image":"quay.io/containerdisks/fedora:41"}}]}}}}`

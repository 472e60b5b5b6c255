package tuning

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/platform/phases"
)

// ControllerName names the controller and its event recorder.
const ControllerName = "fastpathnetwork-tuning"

// NetworkLabel marks the sweep's attachments and benchmarks with the name
// of their FastPathNetwork.
const NetworkLabel = "fastpath.io/tuning-network"

// StepOverhead is what one benchmark of a sweep may take beyond its netperf
// runs: scheduling two pods, the CNI ADD, the runner Job. 2 minutes is a
// generous first bound, not a measured figure (the Pod-mode e2e spec gives a
// whole benchmark 8 minutes); the sweep's bound is the steps times
// (runs + this).
const StepOverhead = 2 * time.Minute

// Reconciler reconciles the tuning of FastPathNetworks.
type Reconciler struct {
	// Client reads from the cache and writes. nil: the manager's client.
	Client client.Client
	// APIReader reads the FastPathNetwork itself, uncached: its status holds
	// the sweep's progress, and a reconcile working from a cached copy older
	// than its own last status write would start a finished step again and
	// leave that step's attachment and benchmark behind. nil: the manager's
	// API reader.
	APIReader client.Reader
	// Recorder records Events; nil: the manager's recorder named ControllerName.
	Recorder record.EventRecorder
	// Namespace holds the sweep's attachments and benchmarks (the operator's
	// namespace). The network's namespaceSelector must admit it. Required.
	Namespace string
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathnetworks,verbs=get;list;watch
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathnetworks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathnetworks/finalizers,verbs=update
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathnodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathattachments,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=fastpath.io,resources=fastpathbenchmarks,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// SetupWithManager fills the unset fields from mgr and registers the
// controller, which watches FastPathNetworks, the attachments and
// benchmarks they own, and FastPathNodes (a node change re-measures, a new
// node is swept). It fails when Namespace is empty.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, options controller.Options) error {
	if r.Namespace == "" {
		return fmt.Errorf("failed to set up the FastPathNetwork tuning controller: no namespace for the sweep's objects")
	}
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor(ControllerName)
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if options.RateLimiter == nil {
		options.RateLimiter = phases.RateLimiter()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1alpha1.FastPathNetwork{}).
		Owns(&v1alpha1.FastPathAttachment{}).
		Owns(&v1alpha1.FastPathBenchmark{}).
		Watches(&v1alpha1.FastPathNode{}, handler.EnqueueRequestsFromMapFunc(r.allTuned)).
		WithOptions(options).Complete(r)
}

// allTuned maps a FastPathNode event to every network that tunes.
func (r *Reconciler) allTuned(ctx context.Context, _ client.Object) []reconcile.Request {
	var nets v1alpha1.FastPathNetworkList
	if err := r.Client.List(ctx, &nets); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, n := range nets.Items {
		if n.Spec.Tuning != nil && n.Spec.Tuning.Mode != "" && n.Spec.Tuning.Mode != v1alpha1.TuningOff {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: n.Name}})
		}
	}
	return out
}

// scope is one reconcile's state.
type scope struct {
	net    *v1alpha1.FastPathNetwork
	spec   v1alpha1.FastPathNetworkSpec // defaulted
	tuning v1alpha1.NetworkTuning       // defaulted
	now    metav1.Time
	reason string // TuningReady reason
	msg    string
	status metav1.ConditionStatus
}

// Reconcile runs the tuning of one FastPathNetwork: Off cleans up; otherwise
// the serving nodes are found, the due node swept, and the answer recorded.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	net := &v1alpha1.FastPathNetwork{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, net); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := net.DeepCopy()
	spec := v1alpha1.DefaultNetworkSpec(net.Spec)
	s := &scope{net: net, spec: spec, tuning: v1alpha1.DefaultTuning(spec), now: metav1.NewTime(r.Now().UTC().Truncate(time.Second))}
	if net.Status.Tuning == nil {
		net.Status.Tuning = &v1alpha1.NetworkTuningStatus{}
	}
	res, err := r.reconcile(ctx, s)
	if perr := r.writeStatus(ctx, before, s); perr != nil && err == nil {
		err = perr
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, s *scope) (ctrl.Result, error) {
	st := s.net.Status.Tuning
	if s.tuning.Mode == v1alpha1.TuningOff {
		st.Applied, st.AppliedAt, st.Differing, st.SweepNode, st.SweepStarted = nil, nil, nil, "", nil
		s.set(metav1.ConditionFalse, v1alpha1.ReasonTuningOff, "spec.tuning.mode is Off: nothing is measured, attachments default to spec.mtu.default and spec.offloads")
		return ctrl.Result{}, r.cleanup(ctx, s.net, "")
	}
	nodes, err := r.servingNodes(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Nodes = slices.DeleteFunc(st.Nodes, func(n v1alpha1.NodeTuning) bool { _, ok := nodes[n.Node]; return !ok })
	if len(nodes) == 0 {
		st.SweepNode, st.SweepStarted = "", nil
		s.set(metav1.ConditionFalse, v1alpha1.ReasonNoNodes, fmt.Sprintf("no Ready FastPathNode reports bridge %s of this network", s.spec.Bridge))
		return ctrl.Result{}, r.cleanup(ctx, s.net, "")
	}
	var res ctrl.Result
	if _, serving := nodes[st.SweepNode]; st.SweepNode != "" && !serving {
		st.SweepNode, st.SweepStarted = "", nil
		if err := r.cleanup(ctx, s.net, ""); err != nil {
			return ctrl.Result{}, err
		}
	}
	if st.SweepNode == "" {
		if node, wait := s.dueNode(nodes); node != "" {
			st.SweepNode, st.SweepStarted = node, &s.now
			r.Recorder.Eventf(s.net, corev1.EventTypeNormal, "SweepStarted", "Measuring %d candidates x %d repetitions on node %s",
				len(candidates(s.tuning)), *s.tuning.Repetitions, node)
		} else if wait > 0 {
			res.RequeueAfter = wait
		}
	}
	if st.SweepNode != "" {
		r2, err := r.sweep(ctx, s, nodes[st.SweepNode])
		if err != nil {
			return ctrl.Result{}, err
		}
		res = r2
	}
	if err := r.apply(ctx, s, len(nodes)); err != nil {
		return ctrl.Result{}, err
	}
	s.summarise(len(nodes))
	return res, nil
}

// servingNodes returns the Ready FastPathNodes that report the network's
// bridge, by name.
func (r *Reconciler) servingNodes(ctx context.Context, s *scope) (map[string]*v1alpha1.FastPathNode, error) {
	var list v1alpha1.FastPathNodeList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("failed to list FastPathNodes: %w", err)
	}
	out := map[string]*v1alpha1.FastPathNode{}
	for i := range list.Items {
		n := &list.Items[i]
		if !meta.IsStatusConditionTrue(n.Status.Conditions, v1alpha1.ReadyCondition) {
			continue
		}
		for _, b := range n.Status.Bridges {
			if b.Name == s.spec.Bridge && b.Ready {
				out[n.Name] = n
			}
		}
	}
	return out, nil
}

// dueNode returns the first node (by name) that needs a sweep: never
// measured, measured with other candidates, or (remeasure.onNodeChange)
// changed kernel or datapath since and minInterval passed; or, when a
// changed node waits for minInterval, how long.
func (s *scope) dueNode(nodes map[string]*v1alpha1.FastPathNode) (string, time.Duration) {
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	var wait time.Duration
	for _, name := range names {
		i := slices.IndexFunc(s.net.Status.Tuning.Nodes, func(n v1alpha1.NodeTuning) bool { return n.Node == name })
		if i < 0 {
			return name, 0
		}
		prev := s.net.Status.Tuning.Nodes[i]
		if !sameCandidates(prev.Evidence, candidates(s.tuning)) {
			return name, 0
		}
		kernel, datapath := fingerprint(nodes[name], s.spec.Bridge)
		if !*s.tuning.Remeasure.OnNodeChange || (kernel == prev.Kernel && datapath == prev.Datapath) {
			continue
		}
		left := s.tuning.Remeasure.MinInterval.Duration
		if prev.MeasuredAt != nil {
			left -= s.now.Sub(prev.MeasuredAt.Time)
		}
		if left <= 0 {
			return name, 0
		}
		if wait == 0 || left < wait {
			wait = left
		}
	}
	return "", wait
}

// fingerprint is what a node's measurement depends on: its kernel and the
// datapath of the network's bridge.
func fingerprint(n *v1alpha1.FastPathNode, bridge string) (kernel, datapath string) {
	for _, b := range n.Status.Bridges {
		if b.Name == bridge {
			datapath = string(b.Datapath)
		}
	}
	return n.Status.Capabilities.Kernel, datapath
}

// candidates returns every combination of the candidate MTUs and offload sets.
func candidates(t v1alpha1.NetworkTuning) []v1alpha1.TuningSetting {
	var out []v1alpha1.TuningSetting
	for _, m := range t.Candidates.MTUs {
		for i := range t.Candidates.Offloads {
			out = append(out, v1alpha1.TuningSetting{MTU: m, Offloads: t.Candidates.Offloads[i].DeepCopy()})
		}
	}
	return out
}

func sameCandidates(ev []v1alpha1.TuningEvidence, cands []v1alpha1.TuningSetting) bool {
	if len(ev) != len(cands) {
		return false
	}
	for i := range ev {
		if ev[i].MTU != cands[i].MTU || !equality.Semantic.DeepEqual(ev[i].Offloads, cands[i].Offloads) {
			return false
		}
	}
	return true
}

// childName is the name of a sweep object: tune-<10 hex of sha256(network,
// node)>-<suffix>, short enough for the benchmark's own child names.
func childName(network, node, suffix string) string {
	h := sha256.Sum256([]byte(network + "/" + node))
	return "tune-" + hex.EncodeToString(h[:])[:10] + "-" + suffix
}

// own makes obj a child of net in r.Namespace with the network label.
func (r *Reconciler) own(net *v1alpha1.FastPathNetwork, obj client.Object) error {
	obj.SetNamespace(r.Namespace)
	obj.SetLabels(map[string]string{NetworkLabel: labelValue(net.Name)})
	return controllerutil.SetControllerReference(net, obj, r.Client.Scheme())
}

// labelValue shortens a network name to a label value (63 characters).
func labelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	h := sha256.Sum256([]byte(name))
	return name[:52] + "-" + hex.EncodeToString(h[:])[:10]
}

// cleanup deletes the sweep objects the network controls in r.Namespace
// (only those whose name starts with prefix, when given); objects it does
// not control are left alone.
func (r *Reconciler) cleanup(ctx context.Context, net *v1alpha1.FastPathNetwork, prefix string) error {
	return r.deleteChildren(ctx, net, func(name string) bool { return prefix == "" || hasPrefix(name, prefix) })
}

// cleanupOthers deletes the sweep objects the network controls in
// r.Namespace whose name does not start with keep: another node's sweep
// left by a reconcile that chose that node from a stale read and lost the
// status write to the one that chose keep's node. Left in place, its
// attachments hold the same benchmark subnets (benchmarkSubnet) on the
// same network, so the current sweep's attachments stay refused
// (SubnetConflict) and it never ends.
func (r *Reconciler) cleanupOthers(ctx context.Context, net *v1alpha1.FastPathNetwork, keep string) error {
	return r.deleteChildren(ctx, net, func(name string) bool { return !hasPrefix(name, keep) })
}

// deleteChildren deletes the sweep objects the network controls in
// r.Namespace whose name del accepts.
func (r *Reconciler) deleteChildren(ctx context.Context, net *v1alpha1.FastPathNetwork, del func(name string) bool) error {
	sel := client.MatchingLabels{NetworkLabel: labelValue(net.Name)}
	var benches v1alpha1.FastPathBenchmarkList
	if err := r.Client.List(ctx, &benches, client.InNamespace(r.Namespace), sel); err != nil {
		return fmt.Errorf("failed to list the sweep's FastPathBenchmarks: %w", err)
	}
	var atts v1alpha1.FastPathAttachmentList
	if err := r.Client.List(ctx, &atts, client.InNamespace(r.Namespace), sel); err != nil {
		return fmt.Errorf("failed to list the sweep's FastPathAttachments: %w", err)
	}
	var objs []client.Object
	for i := range benches.Items {
		objs = append(objs, &benches.Items[i])
	}
	for i := range atts.Items {
		objs = append(objs, &atts.Items[i])
	}
	for _, o := range objs {
		if !metav1.IsControlledBy(o, net) || !del(o.GetName()) || o.GetDeletionTimestamp() != nil {
			continue
		}
		if err := r.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete %T %s: %w", o, klog.KObj(o), err)
		}
	}
	return nil
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func (s *scope) set(status metav1.ConditionStatus, reason, msg string) {
	s.status, s.reason, s.msg = status, reason, msg
}

// writeStatus sets TuningReady, records an Event when its reason changes and
// patches the status when anything changed.
func (r *Reconciler) writeStatus(ctx context.Context, before *v1alpha1.FastPathNetwork, s *scope) error {
	net := s.net
	net.Status.ObservedGeneration = net.Generation
	old := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.TuningReadyCondition)
	meta.SetStatusCondition(&net.Status.Conditions, metav1.Condition{Type: v1alpha1.TuningReadyCondition,
		Status: s.status, Reason: s.reason, Message: s.msg, ObservedGeneration: net.Generation})
	if old == nil || old.Reason != s.reason {
		typ := corev1.EventTypeNormal
		if s.status == metav1.ConditionFalse && s.reason != v1alpha1.ReasonTuningOff && s.reason != v1alpha1.ReasonSweeping {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Event(net, typ, s.reason, s.msg)
	}
	if equality.Semantic.DeepEqual(before.Status, net.Status) {
		return nil
	}
	// Optimistic lock: a status written meanwhile is never overwritten
	// from this older copy; the conflict requeues.
	if err := r.Client.Status().Patch(ctx, net, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to patch the status of FastPathNetwork %s: %w", net.Name, err)
	}
	return nil
}

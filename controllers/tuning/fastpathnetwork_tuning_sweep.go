package tuning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/tuning/sweep"
)

// The netperf point every candidate is measured at: one session of 64 KiB
// messages over 256 KiB socket buffers, the VMCI paper's best point and the
// one design §5.2 reports (docs/design.md §5.5).
const (
	sweepSocketBytes  = 262144
	sweepMessageBytes = 65536
)

// benchmarkSubnet is the IPAM subnet of candidate i's attachment: the
// RFC 2544 benchmarking range 198.18.0.0/15, one /24 per candidate, so the
// sweep's pods never take an address a tenant's subnet might use.
func benchmarkSubnet(i int) string { return fmt.Sprintf("198.18.%d.0/24", i) }

// sweep advances the sweep of node: it ensures the candidates' attachments,
// runs the next step's benchmark when the previous one has finished, and
// when every step has finished (or the sweep's bound has passed) records the
// node's evidence and recommendation and deletes the sweep's objects.
func (r *Reconciler) sweep(ctx context.Context, s *scope, node *v1alpha1.FastPathNode) (ctrl.Result, error) {
	st := s.net.Status.Tuning
	cands := candidates(s.tuning)
	steps := sweep.Order(len(cands), int(*s.tuning.Repetitions))
	tests := []v1alpha1.BenchmarkTest{v1alpha1.TestTCPStream}
	if s.tuning.Objective == v1alpha1.ObjectiveLatency {
		tests = append(tests, v1alpha1.TestTCPRR)
	}
	perStep := time.Duration(len(tests))*s.tuning.Duration.Duration + StepOverhead
	bound := time.Duration(len(steps)) * perStep
	started := s.now.Time
	if st.SweepStarted != nil {
		started = st.SweepStarted.Time
	}
	left := bound - s.now.Sub(started)
	s.set(metav1.ConditionFalse, v1alpha1.ReasonSweeping, fmt.Sprintf("measuring node %s: %d candidates x %d repetitions, at most %s", node.Name, len(cands), *s.tuning.Repetitions, bound))

	if err := r.cleanupOthers(ctx, s.net, childName(s.net.Name, node.Name, "")); err != nil {
		return ctrl.Result{}, err
	}
	failed := map[int]string{} // candidate → why it cannot run at all
	for i, c := range cands {
		why, err := r.ensureAttachment(ctx, s, node.Name, i, c)
		if err != nil {
			return ctrl.Result{}, err
		}
		if why != "" {
			failed[i] = why
		}
	}
	reps := make([][]sweep.Rep, len(cands))
	running := false
	for _, step := range steps {
		if why, ok := failed[step.Candidate]; ok {
			reps[step.Candidate] = append(reps[step.Candidate], sweep.Rep{Failed: why})
			continue
		}
		name := childName(s.net.Name, node.Name, fmt.Sprintf("c%d-r%d", step.Candidate, step.Rep))
		b := &v1alpha1.FastPathBenchmark{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, b)
		switch {
		case apierrors.IsNotFound(err):
			if left <= 0 || running {
				reps[step.Candidate] = append(reps[step.Candidate], sweep.Rep{Failed: fmt.Sprintf("not run: the sweep exceeded its bound of %s", bound)})
				continue
			}
			b = r.benchmark(s, node.Name, name, step.Candidate, tests)
			if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("failed to create FastPathBenchmark %s: %w", klog.KObj(b), err)
			}
			running = true
			continue
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("failed to get FastPathBenchmark %s/%s: %w", r.Namespace, name, err)
		case !metav1.IsControlledBy(b, s.net):
			s.set(metav1.ConditionFalse, v1alpha1.ReasonSweepFailed, fmt.Sprintf("FastPathBenchmark %s exists and FastPathNetwork %s does not control it: it is left alone; delete it to let the sweep go on", klog.KObj(b), s.net.Name))
			return ctrl.Result{}, nil
		}
		rep, done := repOf(b)
		if !done && left > 0 {
			running = true
			continue
		}
		if !done {
			rep = sweep.Rep{Failed: fmt.Sprintf("the sweep exceeded its bound of %s", bound)}
		}
		reps[step.Candidate] = append(reps[step.Candidate], rep)
	}
	if running {
		return ctrl.Result{RequeueAfter: max(left, time.Second)}, nil
	}

	// Every step has an outcome: record the answer and clean up.
	entry := v1alpha1.NodeTuning{Node: node.Name, MeasuredAt: &s.now}
	entry.Kernel, entry.Datapath = fingerprint(node, s.spec.Bridge)
	for i, c := range cands {
		entry.Evidence = append(entry.Evidence, sweep.Evidence(c, reps[i]))
	}
	if rec, ok := sweep.Recommend(entry.Evidence, s.tuning.Objective, *s.spec.MTU.Min, *s.spec.MTU.Max); ok {
		entry.Recommended = cands[rec.Best].DeepCopy()
		entry.MarginPercent, entry.MTUCurve, entry.Message = rec.MarginPercent, rec.Curve, truncate(rec.Message, maxNodeMessage)
		r.Recorder.Eventf(s.net, corev1.EventTypeNormal, "SweepFinished", "Node %s: MTU %d recommended: %s", node.Name, cands[rec.Best].MTU, rec.Message)
	} else {
		entry.Message = "no candidate succeeded with the offloads it asked for: see evidence[].failed and evidence[].offloadMismatch"
		r.Recorder.Eventf(s.net, corev1.EventTypeWarning, v1alpha1.ReasonAllCandidatesFailed, "Node %s: %s; nothing is recommended there", node.Name, entry.Message)
	}
	if i := slices.IndexFunc(st.Nodes, func(n v1alpha1.NodeTuning) bool { return n.Node == node.Name }); i >= 0 {
		st.Nodes[i] = entry
	} else {
		st.Nodes = append(st.Nodes, entry)
		slices.SortFunc(st.Nodes, func(a, b v1alpha1.NodeTuning) int { return strings.Compare(a.Node, b.Node) })
	}
	st.SweepNode, st.SweepStarted = "", nil
	// The next node (if any) starts on the next reconcile, which the status
	// patch and the deletions below trigger.
	return ctrl.Result{RequeueAfter: time.Second}, r.cleanup(ctx, s.net, childName(s.net.Name, node.Name, ""))
}

// ensureAttachment makes sure candidate i's attachment exists and returns
// why the candidate cannot run ("" when it can): the network refused the
// attachment, or an attachment of its name is not the network's.
func (r *Reconciler) ensureAttachment(ctx context.Context, s *scope, node string, i int, c v1alpha1.TuningSetting) (string, error) {
	name := childName(s.net.Name, node, fmt.Sprintf("c%d", i))
	a := &v1alpha1.FastPathAttachment{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: name}, a)
	if apierrors.IsNotFound(err) {
		a = &v1alpha1.FastPathAttachment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.FastPathAttachmentSpec{
			// Selects no VM: Pod-mode benchmarks need only the NAD.
			VMSelector: metav1.LabelSelector{MatchLabels: map[string]string{NetworkLabel: "no-vm"}},
			Placement:  v1alpha1.PlacementNone,
			NetworkRef: &v1alpha1.NetworkReference{Name: s.net.Name},
			Network: &v1alpha1.NetworkSpec{MTU: ptr(c.MTU), Offloads: c.Offloads.DeepCopy(),
				IPAM: v1alpha1.IPAMSpec{Subnet: benchmarkSubnet(i)}},
		}}
		if err := r.own(s.net, a); err != nil {
			return "", err
		}
		if err := r.Client.Create(ctx, a); err != nil && !apierrors.IsAlreadyExists(err) {
			if apierrors.IsInvalid(err) {
				return fmt.Sprintf("the candidate's FastPathAttachment was refused: %v", err), nil
			}
			return "", fmt.Errorf("failed to create FastPathAttachment %s: %w", klog.KObj(a), err)
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to get FastPathAttachment %s/%s: %w", r.Namespace, name, err)
	}
	if !metav1.IsControlledBy(a, s.net) {
		return fmt.Sprintf("FastPathAttachment %s exists and is not this network's: it is left alone", klog.KObj(a)), nil
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, v1alpha1.NetworkAttachmentReadyCondition); c != nil && c.Reason == v1alpha1.ReasonNetworkRefused {
		return fmt.Sprintf("the network refused the candidate's attachment in namespace %s: %s", r.Namespace, c.Message), nil
	}
	return "", nil
}

// benchmark renders step name's Pod-mode FastPathBenchmark of candidate i:
// client and server pods pinned to node, one repetition (the sweep repeats
// by alternating candidates), no baseline.
func (r *Reconciler) benchmark(s *scope, node, name string, i int, tests []v1alpha1.BenchmarkTest) *v1alpha1.FastPathBenchmark {
	b := &v1alpha1.FastPathBenchmark{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.FastPathBenchmarkSpec{
		AttachmentRef: v1alpha1.LocalObjectReference{Name: childName(s.net.Name, node, fmt.Sprintf("c%d", i))},
		Mode:          v1alpha1.BenchmarkModePod,
		Client:        v1alpha1.BenchmarkEndpoint{Node: node},
		Server:        v1alpha1.BenchmarkEndpoint{Node: node},
		Tests:         tests,
		SocketSizes:   []int32{sweepSocketBytes},
		MessageSizes:  []int32{sweepMessageBytes},
		Sessions:      []int32{1},
		Duration:      s.tuning.Duration.DeepCopy(),
		Repetitions:   ptr(int32(1)),
		Pairs:         ptr(int32(1)),
		Baseline:      v1alpha1.BaselineNone,
	}}
	_ = r.own(s.net, b) // the network's scheme is registered: SetControllerReference cannot fail here
	return b
}

// maxNodeMessage is status.tuning.nodes[].message's CRD MaxLength.
const maxNodeMessage = 2048

// truncate cuts s to at most n bytes, ending in "..." when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// repOf reads a finished benchmark's figures and the offloads its fast
// path's client interface negotiated (status.paths[], nil when the runner
// did not report them); done is false while it runs.
func repOf(b *v1alpha1.FastPathBenchmark) (sweep.Rep, bool) {
	switch b.Status.Phase {
	case v1alpha1.BenchmarkSucceeded:
	case v1alpha1.BenchmarkFailed:
		why := "the benchmark failed"
		if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.FailedCondition); c != nil {
			why = c.Reason + ": " + c.Message
		}
		return sweep.Rep{Failed: why}, true
	default:
		return sweep.Rep{}, false
	}
	var rep sweep.Rep
	for _, p := range b.Status.Paths {
		if p.Path == benchjob.PathFastPath {
			rep.Negotiated = p.Offloads.DeepCopy()
		}
	}
	for _, p := range b.Status.Points {
		switch p.Test {
		case v1alpha1.TestTCPStream:
			rep.Mbps = float64(p.FastPathMbps)
			fmt.Sscanf(p.FastPathServiceDemandUsPerKB, "%g", &rep.ServiceDemandUsPerKB)
		case v1alpha1.TestTCPRR:
			if p.FastPathLatency != nil {
				rep.LatencyUs = float64(p.FastPathLatency.Nanoseconds()) / 1000
			}
		}
	}
	if rep.Mbps <= 0 {
		rep.Failed = "the benchmark succeeded without a TCP_STREAM figure"
	}
	return rep, true
}

func ptr[T any](v T) *T { return &v }

package benchmark

import (
	"context"
	"errors"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/controllers/benchmark/summary"
)

// reconcileGeneration starts a new run when the spec changed since the status
// was written (or was never written): the status is reset and the previous
// run's gauges removed.
func (r *Reconciler) reconcileGeneration(_ context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	if b.Status.ObservedGeneration == b.Generation && b.Status.Phase != "" {
		return ctrl.Result{}, nil
	}
	b.Status = fastpathv1alpha1.FastPathBenchmarkStatus{ObservedGeneration: b.Generation, Conditions: b.Status.Conditions}
	setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, "Starting a run of generation "+fmt.Sprint(b.Generation))
	forget(b.Namespace, b.Name)
	return ctrl.Result{}, nil
}

// reconcileStaleChildren deletes the runner Jobs and netserver pods of older
// generations.
func (r *Reconciler) reconcileStaleChildren(ctx context.Context, s *scope) (ctrl.Result, error) {
	gen := fmt.Sprint(s.bench.Generation)
	stale := func(o client.Object) bool { return o.GetLabels()[benchjob.LabelGeneration] != gen }
	return ctrl.Result{}, r.deleteOwned(ctx, s.bench, stale)
}

// deleteOwned deletes the Jobs and Pods the benchmark controls for which match
// returns true. Jobs go with background propagation: their pods follow
// through the garbage collector.
func (r *Reconciler) deleteOwned(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark, match func(client.Object) bool) error {
	sel := client.MatchingLabels{benchjob.LabelBenchmark: benchjob.LabelValue(b.Name)}
	var jobs batchv1.JobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(b.Namespace), sel); err != nil {
		return fmt.Errorf("failed to list Jobs of FastPathBenchmark %s: %w", klog.KObj(b), err)
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(b.Namespace), sel); err != nil {
		return fmt.Errorf("failed to list Pods of FastPathBenchmark %s: %w", klog.KObj(b), err)
	}
	var objs []client.Object
	for i := range jobs.Items {
		objs = append(objs, &jobs.Items[i])
	}
	for i := range pods.Items {
		objs = append(objs, &pods.Items[i])
	}
	for _, o := range objs {
		if !metav1.IsControlledBy(o, b) || !o.GetDeletionTimestamp().IsZero() || !match(o) {
			continue
		}
		if err := r.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("failed to delete %T %s: %w", o, klog.KObj(o), err)
		}
		log.FromContext(ctx).Info("Deleted benchmark child", "object", klog.KObj(o), "generation", o.GetLabels()[benchjob.LabelGeneration])
	}
	return nil
}

// reconcileFinished stops a finished run: its netserver pods are deleted and
// its gauges exported; nothing runs again until the spec changes.
func (r *Reconciler) reconcileFinished(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !finished(s.bench) {
		return ctrl.Result{}, nil
	}
	s.stop = true
	observe(s.bench)
	return ctrl.Result{}, r.deleteOwned(ctx, s.bench, func(o client.Object) bool { _, isPod := o.(*corev1.Pod); return isPod })
}

// reconcileSpec rejects what the CRD cannot: tests the controller does not
// run, Pod-mode nodes that differ, and VM pairs without VMs.
func (r *Reconciler) reconcileSpec(_ context.Context, s *scope) (ctrl.Result, error) {
	var problems []string
	if benchjob.HasVSockTests(s.spec) {
		switch {
		case s.spec.Mode != fastpathv1alpha1.BenchmarkModeVM:
			problems = append(problems, "VSOCK_STREAM and VSOCK_RR need spec.mode VM: vsock connects a VM to its host, and pods have no vsock device")
		case benchjob.MaxPairs(s.spec) != 1:
			problems = append(problems, fmt.Sprintf("VSOCK_STREAM and VSOCK_RR measure one pair (a vsock service targets one VM): spec.pairs must be 1, got %d", benchjob.MaxPairs(s.spec)))
		}
	}
	switch s.spec.Mode {
	case fastpathv1alpha1.BenchmarkModePod:
		if _, err := benchjob.PodNode(s.spec); err != nil {
			problems = append(problems, err.Error())
		}
	case fastpathv1alpha1.BenchmarkModeVM:
		if have, want := len(vmPairs(s.spec)), benchjob.MaxPairs(s.spec); have < want {
			problems = append(problems, fmt.Sprintf("spec.pairs %d needs %d client/server VM pairs (2N VMs): spec.client/spec.server plus %d in spec.additionalPairs, got %d", want, want, want-1, have-1))
		}
	}
	if len(problems) == 0 {
		return ctrl.Result{}, nil
	}
	msg := strings.Join(problems, "; ")
	setFailed(s.bench, fastpathv1alpha1.ReasonUnsupported, msg)
	s.stop = true
	return ctrl.Result{}, reconcile.TerminalError(errors.New(msg))
}

// reconcileRunnerAccess ensures the results ConfigMap and the runner's
// ServiceAccount, Role and RoleBinding. One of those names held by an object
// the benchmark does not control stops the run Pending with
// RunnerObjectConflict naming it: the object is never adopted or changed
// (its owner may hold rights the benchmark's creator lacks), and the
// benchmark goes on once it is deleted (the watch in SetupWithManager).
func (r *Reconciler) reconcileRunnerAccess(ctx context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	cm := benchjob.ResultsConfigMap(b.Name, b.Namespace)
	sa, role, rb := benchjob.RunnerRBAC(b.Name, b.Namespace)
	err := r.ensure(ctx, b, cm, func(existing, want client.Object) {
		existing.SetLabels(want.GetLabels())
	})
	if err == nil {
		err = r.ensure(ctx, b, sa, func(existing, want client.Object) { existing.SetLabels(want.GetLabels()) })
	}
	if err == nil {
		err = r.ensure(ctx, b, role, func(existing, want client.Object) {
			existing.SetLabels(want.GetLabels())
			existing.(*rbacv1.Role).Rules = want.(*rbacv1.Role).Rules
		})
	}
	if err == nil {
		// A RoleBinding's roleRef is immutable; ours never changes.
		err = r.ensure(ctx, b, rb, func(existing, want client.Object) {
			existing.SetLabels(want.GetLabels())
			existing.(*rbacv1.RoleBinding).Subjects = want.(*rbacv1.RoleBinding).Subjects
		})
	}
	var foreign *foreignObjectError
	if errors.As(err, &foreign) {
		setPending(b, fastpathv1alpha1.ReasonRunnerObjectConflict, foreign.Error())
		s.stop = true
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	s.configMap = cm
	b.Status.ResultsConfigMap = cm.Name
	return ctrl.Result{}, nil
}

// foreignObjectError says that a runner object's name is taken by an object
// the benchmark does not control.
type foreignObjectError struct {
	kind string
	key  client.ObjectKey
}

func (e *foreignObjectError) Error() string {
	return fmt.Sprintf("%s %s exists and is not controlled by this benchmark: left as it is; delete it or rename the benchmark", e.kind, e.key)
}

// ensure creates obj (its desired state, controlled by b) when no object of
// its name exists, or brings the one b controls up to date with mutate
// (existing is the stored object, want the desired one); on return obj holds
// the object as stored. An object of that name that b does not control (no
// controller ownerReference to b) is neither adopted nor changed: ensure
// returns a *foreignObjectError naming it.
func (r *Reconciler) ensure(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark, obj client.Object, mutate func(existing, want client.Object)) error {
	want := obj.DeepCopyObject().(client.Object)
	kind := fmt.Sprintf("%T", obj)
	if gvk, err := apiutil.GVKForObject(obj, r.Client.Scheme()); err == nil {
		kind = gvk.Kind
	}
	key := client.ObjectKeyFromObject(obj)
	err := r.Client.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		// obj still holds the desired state (a Get that finds nothing
		// leaves it alone, as controllerutil.CreateOrUpdate relies on).
		if err := controllerutil.SetControllerReference(b, obj, r.Client.Scheme()); err != nil {
			return fmt.Errorf("failed to set owner of %s %s: %w", kind, key, err)
		}
		err := r.Client.Create(ctx, obj, client.FieldOwner(fastpathv1alpha1.FieldManager))
		if err == nil {
			log.FromContext(ctx).Info("Created benchmark child", "kind", kind, "object", klog.KObj(obj))
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("failed to create %s %s: %w", kind, key, err)
		}
		// The cache was behind: decide on the live object.
		if err := r.APIReader.Get(ctx, key, obj); err != nil {
			return fmt.Errorf("failed to get %s %s: %w", kind, key, err)
		}
	case err != nil:
		return fmt.Errorf("failed to get %s %s: %w", kind, key, err)
	}
	if !metav1.IsControlledBy(obj, b) {
		return &foreignObjectError{kind: kind, key: key}
	}
	base := obj.DeepCopyObject().(client.Object)
	mutate(obj, want)
	if equality.Semantic.DeepEqual(base, obj) {
		return nil
	}
	if err := r.Client.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}), client.FieldOwner(fastpathv1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("failed to update %s %s: %w", kind, key, err)
	}
	log.FromContext(ctx).Info("Updated benchmark child", "kind", kind, "object", klog.KObj(obj))
	return nil
}

// lookupJob finds the runner Job of this generation: once it exists the run is
// underway, and the attachment and endpoint phases are skipped (a later change
// of the attachment or the VMs does not disturb a running benchmark).
func (r *Reconciler) lookupJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: benchjob.JobName(b.Name, b.Generation)}, job)
	switch {
	case err == nil && metav1.IsControlledBy(job, b):
		s.job = job
		return ctrl.Result{}, nil
	case err == nil:
		setFailed(b, fastpathv1alpha1.ReasonRunnerFailed, fmt.Sprintf("Job %s exists and is not owned by this benchmark: delete it or rename the benchmark", job.Name))
		s.stop = true
		return ctrl.Result{}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("failed to get Job %s/%s: %w", b.Namespace, benchjob.JobName(b.Name, b.Generation), err)
	}
	return ctrl.Result{}, nil
}

// reconcileAttachment waits for the attachment and takes the NAD and MTU from
// it. VM mode needs it Ready (VMs wired, co-located, nodes ready); Pod mode
// measures the node datapath without VMs, so the NetworkAttachmentDefinition
// is all it needs (NetworkAttachmentReady): an attachment that selects no VM
// yet is never Ready, and must not block a Pod-mode benchmark.
func (r *Reconciler) reconcileAttachment(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.job != nil {
		return ctrl.Result{}, nil
	}
	b := s.bench
	a := &fastpathv1alpha1.FastPathAttachment{}
	name := s.spec.AttachmentRef.Name
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: name}, a); err != nil {
		if apierrors.IsNotFound(err) {
			setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, fmt.Sprintf("FastPathAttachment %s not found", name))
			s.stop = true
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("failed to get FastPathAttachment %s/%s: %w", b.Namespace, name, err)
	}
	needed := fastpathv1alpha1.ReadyCondition
	if s.spec.Mode == fastpathv1alpha1.BenchmarkModePod {
		needed = fastpathv1alpha1.NetworkAttachmentReadyCondition
	}
	if c := meta.FindStatusCondition(a.Status.Conditions, needed); c == nil || c.Status != metav1.ConditionTrue {
		msg := fmt.Sprintf("FastPathAttachment %s is not %s", name, needed)
		if c != nil && c.Message != "" {
			msg += ": " + c.Message
		}
		setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, msg)
		s.stop = true
		return ctrl.Result{}, nil
	}
	s.attachment = a
	if !benchjob.HasIPTests(s.spec) {
		return ctrl.Result{}, nil // vsock tests only: no virtio-net path involved
	}
	if a.Spec.Network == nil {
		setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, fmt.Sprintf("FastPathAttachment %s has no spec.network: there is no fast virtio-net path for the TCP tests to measure", name))
		s.stop = true
		return ctrl.Result{}, nil
	}
	s.params.NetworkAttachment = benchjob.NetworkAttachmentRef(a.Namespace, a.Name, a.Status.NetworkAttachmentDefinition)
	s.params.MTU = a.Status.MTU
	if s.params.MTU == 0 {
		s.params.MTU = *fastpathv1alpha1.DefaultAttachmentSpec(a.Spec).Network.MTU
	}
	return ctrl.Result{}, nil
}

// reconcileJob creates the runner Job once every endpoint is known (clearing
// what an earlier run left in the ConfigMap), and reports it Running.
func (r *Reconciler) reconcileJob(ctx context.Context, s *scope) (ctrl.Result, error) {
	b := s.bench
	if s.job == nil {
		job, err := benchjob.RunnerJob(s.params, s.endpoints)
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to render the runner Job of FastPathBenchmark %s: %w", klog.KObj(b), err)
		}
		if err := controllerutil.SetControllerReference(b, job, r.Client.Scheme()); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to own Job %s: %w", klog.KObj(job), err)
		}
		if err := r.clearResults(ctx, s.configMap, job.Name); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, fmt.Errorf("failed to create Job %s: %w", klog.KObj(job), err)
		}
		log.FromContext(ctx).Info("Created runner job", "job", klog.KObj(job))
		s.job = job
		now := metav1.Now()
		b.Status.StartTime = &now
	}
	job := s.job
	b.Status.JobName = job.Name
	if b.Status.StartTime == nil {
		start := job.CreationTimestamp
		if job.Status.StartTime != nil {
			start = *job.Status.StartTime
		}
		b.Status.StartTime = &start
	}
	paths := benchjob.Paths(s.spec)
	plan := fmt.Sprintf("%d points × %d repetitions on %s (%d runs), %s per run", benchjob.PointCount(s.spec), *s.spec.Repetitions, strings.Join(paths, ", "), benchjob.RunCount(s.spec), benchjob.WholeSeconds(s.spec.Duration.Duration))
	if job.Status.Active > 0 {
		setRunning(b, fastpathv1alpha1.ReasonJobRunning, fmt.Sprintf("Job %s is running: %s", job.Name, plan))
	} else {
		setRunning(b, fastpathv1alpha1.ReasonJobCreated, fmt.Sprintf("Job %s created: %s", job.Name, plan))
	}
	return ctrl.Result{}, nil
}

// clearResults empties the ConfigMap's data if it holds the outcome of another
// run than runID.
func (r *Reconciler) clearResults(ctx context.Context, cm *corev1.ConfigMap, runID string) error {
	if len(cm.Data) == 0 && len(cm.BinaryData) == 0 || cm.Data[benchjob.RunIDKey] == runID {
		return nil
	}
	cm.Data, cm.BinaryData = nil, nil
	if err := r.Client.Update(ctx, cm); err != nil {
		return fmt.Errorf("failed to clear ConfigMap %s: %w", klog.KObj(cm), err)
	}
	return nil
}

// reconcileResults reads the runner's outcome from the ConfigMap and finishes
// the run: Succeeded or Failed by the criteria, or Failed with the runner's
// reason. A Job that ended without writing anything fails the run too.
func (r *Reconciler) reconcileResults(ctx context.Context, s *scope) (ctrl.Result, error) {
	b, job := s.bench, s.job
	ended, endMsg := jobEnded(job)
	cm := s.configMap
	if ended && cm.Data[benchjob.RunIDKey] != job.Name {
		// The runner writes the ConfigMap before it exits; the cache may not have
		// seen that write yet.
		fresh := &corev1.ConfigMap{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), fresh); err != nil {
			return ctrl.Result{}, fmt.Errorf("failed to get ConfigMap %s: %w", klog.KObj(cm), err)
		}
		cm = fresh
	}
	doc, err := benchjob.ReadOutcome(cm.Data)
	var runnerErr *benchjob.RunnerError
	switch {
	case cm.Data[benchjob.RunIDKey] != job.Name:
		if !ended {
			return ctrl.Result{}, nil
		}
		msg := fmt.Sprintf("Job %s %s without writing results to ConfigMap %s; see `kubectl logs job/%s`", job.Name, endMsg, cm.Name, job.Name)
		if out := r.runnerExit(ctx, job); out != "" {
			msg += "; " + out
		}
		r.finish(ctx, s, fastpathv1alpha1.ReasonRunnerFailed, msg)
	case errors.As(err, &runnerErr):
		reason, msg := runnerErr.Reason, runnerErr.Message
		if reason != fastpathv1alpha1.ReasonNetserverUnreachable && reason != fastpathv1alpha1.ReasonRunnerFailed {
			if reason != "" {
				msg = reason + ": " + msg
			}
			reason = fastpathv1alpha1.ReasonRunnerFailed
		}
		r.finish(ctx, s, reason, fmt.Sprintf("Runner %s failed: %s", job.Name, msg))
	case errors.Is(err, benchjob.ErrNoOutcome):
		r.finish(ctx, s, fastpathv1alpha1.ReasonResultsInvalid, fmt.Sprintf("Runner %s wrote neither %s nor %s to ConfigMap %s", job.Name, benchjob.ResultsKey, benchjob.ErrorKey, cm.Name))
	case err != nil:
		r.finish(ctx, s, fastpathv1alpha1.ReasonResultsInvalid, fmt.Sprintf("%s in ConfigMap %s: %v", benchjob.ResultsKey, cm.Name, err))
	default:
		sum := summary.Summarize(doc)
		b.Status.BestGbps, b.Status.Speedup, b.Status.CPURatio = sum.BestGbps, sum.Speedup, sum.CPURatio
		b.Status.Paths, b.Status.Points = sum.Paths, sum.Points
		if s.spec.CompareTo != nil {
			ref, err := r.readReference(ctx, b)
			if isAPIError(err) && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			if err != nil {
				r.finish(ctx, s, fastpathv1alpha1.ReasonCompareToInvalid, fmt.Sprintf("Run %s measured, but spec.compareTo cannot be read now: %s", job.Name, strings.TrimSuffix(err.Error(), ": "+errCompareToNotReady.Error())))
				break
			}
			sum = sum.Compared(doc, ref.doc)
			b.Status.ComparedTo, b.Status.Comparison = ref.name, summary.ComparedPoints(*sum.Comparison)
		}
		met, msg := summary.Evaluate(sum, s.spec.SuccessCriteria)
		if sum.TotalPoints > len(sum.Points) {
			msg += fmt.Sprintf(" (status shows %d of %d points; all are in ConfigMap %s)", len(sum.Points), sum.TotalPoints, cm.Name)
		}
		if met {
			r.finish(ctx, s, fastpathv1alpha1.ReasonCriteriaMet, msg)
		} else {
			r.finish(ctx, s, fastpathv1alpha1.ReasonThresholdNotMet, msg)
		}
	}
	return ctrl.Result{}, r.deleteOwned(ctx, b, func(o client.Object) bool { _, isPod := o.(*corev1.Pod); return isPod })
}

// finish ends the run with reason (CriteriaMet succeeds, anything else fails).
func (r *Reconciler) finish(ctx context.Context, s *scope, reason, msg string) {
	now := metav1.Now()
	s.bench.Status.CompletionTime = &now
	if reason == fastpathv1alpha1.ReasonCriteriaMet {
		setSucceeded(s.bench, msg)
	} else {
		setFailed(s.bench, reason, msg)
	}
	observe(s.bench)
	log.FromContext(ctx).Info("Benchmark finished", "phase", s.bench.Status.Phase, "reason", reason, "bestGbps", s.bench.Status.BestGbps, "speedup", s.bench.Status.Speedup)
}

// runnerOutputMax bounds how much of the runner's termination message a
// condition quotes, bytes (the message's tail: the error comes last).
const runnerOutputMax = 1024

// runnerExit says how the runner container of job's pod ended: exit code,
// reason and termination message, which kubelet fills with the tail of the
// runner's log when the runner wrote none
// (TerminationMessageFallbackToLogsOnError), cut to its last
// runnerOutputMax bytes. "" when no such pod or ended container is left.
// The message stays in the benchmark's status after the pod is gone.
func (r *Reconciler) runnerExit(ctx context.Context, job *batchv1.Job) string {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		log.FromContext(ctx).Error(err, "Failed to list the runner's pods", "job", klog.KObj(job))
		return ""
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != benchjob.RunnerContainer || t == nil {
				continue
			}
			out := fmt.Sprintf("its runner container in pod %s exited %d (%s)", p.Name, t.ExitCode, t.Reason)
			if m := strings.TrimSpace(t.Message); m != "" {
				if len(m) > runnerOutputMax {
					m = "…" + strings.ToValidUTF8(m[len(m)-runnerOutputMax:], "")
				}
				out += ": " + m
			}
			return out
		}
	}
	return ""
}

// jobEnded reports whether the Job has finished (condition Complete or Failed)
// and says how, e.g. "failed (DeadlineExceeded: Job was active longer than
// specified deadline)".
func jobEnded(job *batchv1.Job) (bool, string) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, "completed"
		case batchv1.JobFailed:
			return true, fmt.Sprintf("failed (%s: %s)", c.Reason, c.Message)
		}
	}
	return false, ""
}

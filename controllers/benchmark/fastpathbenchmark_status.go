package benchmark

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// setCondition sets one condition, stamped with the benchmark's generation.
// meta.SetStatusCondition keeps lastTransitionTime when the status does not
// change, so an unchanged condition does not make a status write.
func setCondition(b *fastpathv1alpha1.FastPathBenchmark, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: b.Generation,
	})
}

// setPending: waiting for the attachment, the endpoints or the SSH key. Running
// is False with the reason; Succeeded and Failed are removed (not decided).
func setPending(b *fastpathv1alpha1.FastPathBenchmark, reason, msg string) {
	b.Status.Phase = fastpathv1alpha1.BenchmarkPending
	setCondition(b, fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, reason, msg)
	meta.RemoveStatusCondition(&b.Status.Conditions, fastpathv1alpha1.SucceededCondition)
	meta.RemoveStatusCondition(&b.Status.Conditions, fastpathv1alpha1.FailedCondition)
}

// setRunning: the runner Job exists (reason JobCreated) or has a running pod
// (JobRunning).
func setRunning(b *fastpathv1alpha1.FastPathBenchmark, reason, msg string) {
	b.Status.Phase = fastpathv1alpha1.BenchmarkRunning
	setCondition(b, fastpathv1alpha1.RunningCondition, metav1.ConditionTrue, reason, msg)
	meta.RemoveStatusCondition(&b.Status.Conditions, fastpathv1alpha1.SucceededCondition)
	meta.RemoveStatusCondition(&b.Status.Conditions, fastpathv1alpha1.FailedCondition)
}

// setSucceeded: results are in and every criterion is met (reason CriteriaMet
// on all three conditions).
func setSucceeded(b *fastpathv1alpha1.FastPathBenchmark, msg string) {
	b.Status.Phase = fastpathv1alpha1.BenchmarkSucceeded
	r := fastpathv1alpha1.ReasonCriteriaMet
	setCondition(b, fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, r, msg)
	setCondition(b, fastpathv1alpha1.SucceededCondition, metav1.ConditionTrue, r, msg)
	setCondition(b, fastpathv1alpha1.FailedCondition, metav1.ConditionFalse, r, msg)
}

// setFailed: the runner failed, the results are unusable, a criterion was
// missed, or the spec cannot be run; reason says which.
func setFailed(b *fastpathv1alpha1.FastPathBenchmark, reason, msg string) {
	b.Status.Phase = fastpathv1alpha1.BenchmarkFailed
	setCondition(b, fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, reason, msg)
	setCondition(b, fastpathv1alpha1.SucceededCondition, metav1.ConditionFalse, reason, msg)
	setCondition(b, fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, reason, msg)
}

// finished reports whether the status describes a completed run of the
// current generation.
func finished(b *fastpathv1alpha1.FastPathBenchmark) bool {
	return b.Status.ObservedGeneration == b.Generation &&
		(b.Status.Phase == fastpathv1alpha1.BenchmarkSucceeded || b.Status.Phase == fastpathv1alpha1.BenchmarkFailed)
}

// headline is the phase's deciding condition: Running while pending or
// running, Succeeded or Failed once finished.
func headline(st *fastpathv1alpha1.FastPathBenchmarkStatus) *metav1.Condition {
	t := fastpathv1alpha1.RunningCondition
	switch st.Phase {
	case fastpathv1alpha1.BenchmarkSucceeded:
		t = fastpathv1alpha1.SucceededCondition
	case fastpathv1alpha1.BenchmarkFailed:
		t = fastpathv1alpha1.FailedCondition
	}
	return meta.FindStatusCondition(st.Conditions, t)
}

// recordTransition emits one Event when the phase or its deciding reason
// changed: Warning for Failed and for RunnerObjectConflict (someone must
// delete an object or rename the benchmark), Normal otherwise; the reason is the
// condition's reason and the message its message.
func recordTransition(rec record.EventRecorder, b *fastpathv1alpha1.FastPathBenchmark, before *fastpathv1alpha1.FastPathBenchmarkStatus) {
	now := headline(&b.Status)
	if rec == nil || now == nil {
		return
	}
	if was := headline(before); was != nil && before.Phase == b.Status.Phase && was.Reason == now.Reason {
		return
	}
	typ := corev1.EventTypeNormal
	if b.Status.Phase == fastpathv1alpha1.BenchmarkFailed || now.Reason == fastpathv1alpha1.ReasonRunnerObjectConflict {
		typ = corev1.EventTypeWarning
	}
	rec.Event(b, typ, now.Reason, now.Message)
}

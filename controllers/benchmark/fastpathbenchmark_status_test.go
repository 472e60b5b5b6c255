package benchmark

import (
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// conds renders conditions as "Type=Status/Reason" for compact comparison.
func conds(b *fastpathv1alpha1.FastPathBenchmark) []string {
	var out []string
	for _, c := range b.Status.Conditions {
		out = append(out, c.Type+"="+string(c.Status)+"/"+c.Reason)
		if c.ObservedGeneration != b.Generation {
			out = append(out, "stale generation on "+c.Type)
		}
	}
	return out
}

func TestConditionSetters(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(b *fastpathv1alpha1.FastPathBenchmark)
		phase fastpathv1alpha1.BenchmarkPhase
		want  []string
	}{
		{
			name: "pending removes a previous verdict",
			set: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setPending(b, fastpathv1alpha1.ReasonEndpointNotFound, "m")
			},
			phase: fastpathv1alpha1.BenchmarkPending,
			want:  []string{"Running=False/EndpointNotFound"},
		},
		{
			name:  "running",
			set:   func(b *fastpathv1alpha1.FastPathBenchmark) { setRunning(b, fastpathv1alpha1.ReasonJobRunning, "m") },
			phase: fastpathv1alpha1.BenchmarkRunning,
			want:  []string{"Running=True/JobRunning"},
		},
		{
			name:  "succeeded",
			set:   func(b *fastpathv1alpha1.FastPathBenchmark) { setSucceeded(b, "m") },
			phase: fastpathv1alpha1.BenchmarkSucceeded,
			want:  []string{"Running=False/CriteriaMet", "Succeeded=True/CriteriaMet", "Failed=False/CriteriaMet"},
		},
		{
			name:  "failed",
			set:   func(b *fastpathv1alpha1.FastPathBenchmark) { setFailed(b, fastpathv1alpha1.ReasonThresholdNotMet, "m") },
			phase: fastpathv1alpha1.BenchmarkFailed,
			want:  []string{"Running=False/ThresholdNotMet", "Succeeded=False/ThresholdNotMet", "Failed=True/ThresholdNotMet"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			b := &fastpathv1alpha1.FastPathBenchmark{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			// Start from a finished run so stale verdicts would show.
			setSucceeded(b, "old")
			tc.set(b)
			g.Expect(b.Status.Phase).To(gomega.Equal(tc.phase))
			g.Expect(conds(b)).To(gomega.ConsistOf(tc.want))
		})
	}
}

func TestFinished(t *testing.T) {
	g := gomega.NewWithT(t)
	b := &fastpathv1alpha1.FastPathBenchmark{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	b.Status.ObservedGeneration = 2
	setRunning(b, fastpathv1alpha1.ReasonJobCreated, "m")
	g.Expect(finished(b)).To(gomega.BeFalse())
	setFailed(b, fastpathv1alpha1.ReasonRunnerFailed, "m")
	g.Expect(finished(b)).To(gomega.BeTrue())
	b.Generation = 3
	g.Expect(finished(b)).To(gomega.BeFalse(), "a spec change makes a finished run stale")
}

func TestRecordTransition(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before func(b *fastpathv1alpha1.FastPathBenchmark)
		after  func(b *fastpathv1alpha1.FastPathBenchmark)
		want   []string
	}{
		{
			name:   "first status",
			before: func(*fastpathv1alpha1.FastPathBenchmark) {},
			after: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setPending(b, fastpathv1alpha1.ReasonWaitingForAttachment, "no attachment")
			},
			want: []string{"Normal WaitingForAttachment no attachment"},
		},
		{
			name: "same phase and reason, new message: no event",
			before: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setPending(b, fastpathv1alpha1.ReasonEndpointNotFound, "two pods")
			},
			after: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setPending(b, fastpathv1alpha1.ReasonEndpointNotFound, "one pod")
			},
		},
		{
			name: "same phase, new reason",
			before: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setRunning(b, fastpathv1alpha1.ReasonJobCreated, "created")
			},
			after: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setRunning(b, fastpathv1alpha1.ReasonJobRunning, "running")
			},
			want: []string{"Normal JobRunning running"},
		},
		{
			name: "failure is a warning",
			before: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setRunning(b, fastpathv1alpha1.ReasonJobRunning, "running")
			},
			after: func(b *fastpathv1alpha1.FastPathBenchmark) {
				setFailed(b, fastpathv1alpha1.ReasonNetserverUnreachable, "no netserver")
			},
			want: []string{"Warning NetserverUnreachable no netserver"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			b := &fastpathv1alpha1.FastPathBenchmark{}
			tc.before(b)
			before := b.Status.DeepCopy()
			tc.after(b)
			rec := record.NewFakeRecorder(4)
			recordTransition(rec, b, before)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			g.Expect(got).To(gomega.Equal(tc.want))
		})
	}
}

package gate_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/bench/gate"
)

var key = types.NamespacedName{Namespace: "apps", Name: "ci"}

// follow runs a Follower over s with a stepping clock, interval 2s and
// grace 1m, and returns the result, its error and the progress lines.
func follow(s *script, timeout time.Duration) (gate.Result, []string, *stepClock, error) {
	clk := newStepClock()
	var progress bytes.Buffer
	f := &gate.Follower{Client: s, Clock: clk, Interval: 2 * time.Second, Grace: time.Minute, Progress: &progress}
	res, err := f.Follow(context.Background(), key, timeout)
	return res, strings.Split(strings.TrimSuffix(progress.String(), "\n"), "\n"), clk, err
}

func notFound() error {
	return apierrors.NewNotFound(schema.GroupResource{Group: "fastpath.io", Resource: "fastpathbenchmarks"}, "ci")
}

// A benchmark that runs to the end prints one line per transition (a
// message that changes alone is none) and ends with its exit code.
func TestFollowPrintsTransitionsUntilDone(t *testing.T) {
	g := gomega.NewWithT(t)
	s := &script{attachment: func(int) bool { return true }, steps: []step{
		{b: bench(1, 0, "")},
		{b: pending(fastpathv1alpha1.ReasonWaitingForAttachment, "FastPathAttachment db-link is not NetworkAttachmentReady")},
		{b: pending(fastpathv1alpha1.ReasonEndpointNotFound, "Waiting for endpoints: pod ci-netserver-fastpath-1 created")},
		{b: pending(fastpathv1alpha1.ReasonEndpointNotFound, "Waiting for endpoints: pod ci-netserver-fastpath-1 has no address")},
		{b: running(fastpathv1alpha1.ReasonJobCreated, "Job ci-run-1 created")},
		{b: running(fastpathv1alpha1.ReasonJobRunning, "Job ci-run-1 is running")},
		{b: running(fastpathv1alpha1.ReasonJobRunning, "Job ci-run-1 is running")},
		{b: failed(fastpathv1alpha1.ReasonThresholdNotMet, "best fast path 1.00 Gbps: minThroughputMbps 5000 not met (1000 Mbps)")},
	}}
	res, lines, clk, err := follow(s, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.State).To(gomega.Equal(gate.Done))
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitCriteriaNotMet))
	g.Expect(res.Outcome.Reason).To(gomega.Equal(fastpathv1alpha1.ReasonThresholdNotMet))
	g.Expect(res.Benchmark.Status.Phase).To(gomega.Equal(fastpathv1alpha1.BenchmarkFailed))
	g.Expect(res.Elapsed).To(gomega.Equal(14 * time.Second))
	g.Expect(clk.waits).To(gomega.HaveEach(2 * time.Second))
	g.Expect(lines).To(gomega.Equal([]string{
		"[0s] Following FastPathBenchmark apps/ci for up to 1h0m0s (--timeout)",
		"[0s] - NotObserved: fastpath-operator has not observed generation 1 yet (status is of generation 0) (exit 2 unless that changes within 1m0s)",
		"[2s] Pending WaitingForAttachment: FastPathAttachment db-link is not NetworkAttachmentReady",
		"[4s] Pending EndpointNotFound: Waiting for endpoints: pod ci-netserver-fastpath-1 created",
		"[8s] Running JobCreated: Job ci-run-1 created",
		"[10s] Running JobRunning: Job ci-run-1 is running",
		"[14s] Failed ThresholdNotMet: best fast path 1.00 Gbps: minThroughputMbps 5000 not met (1000 Mbps)",
	}))
}

// A benchmark whose attachment does not exist ends after the grace with
// exit 2, quoting its reason and message; one whose attachment exists and
// is not Ready waits until the timeout.
func TestFollowFailsFastOnAMissingAttachment(t *testing.T) {
	g := gomega.NewWithT(t)
	s := &script{steps: []step{{b: pending(fastpathv1alpha1.ReasonWaitingForAttachment, "FastPathAttachment db-link not found")}}}
	f := &gate.Follower{Client: s, Clock: newStepClock(), Interval: 2 * time.Second, Grace: 5 * time.Second}
	res, err := f.Follow(context.Background(), key, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Elapsed).To(gomega.Equal(5*time.Second), "the last wait stops at the grace")
	g.Expect(f.Clock.(*stepClock).waits).To(gomega.Equal([]time.Duration{2 * time.Second, 2 * time.Second, time.Second}))

	res, lines, _, err := follow(s, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitCouldNotRun))
	g.Expect(res.Outcome.Reason).To(gomega.Equal(fastpathv1alpha1.ReasonWaitingForAttachment))
	g.Expect(res.Outcome.Message).To(gomega.Equal("FastPathAttachment db-link not found (still WaitingForAttachment after 1m0s)"))
	g.Expect(res.Elapsed).To(gomega.Equal(time.Minute), "the grace, not the hour of the timeout")
	g.Expect(lines[1]).To(gomega.Equal("[0s] Pending WaitingForAttachment: FastPathAttachment db-link not found (exit 2 unless that changes within 1m0s)"))
	g.Expect(lines[len(lines)-1]).To(gomega.Equal("[1m0s] WaitingForAttachment: FastPathAttachment db-link not found (still WaitingForAttachment after 1m0s)"))

	s = &script{attachment: func(int) bool { return true }, steps: []step{{b: pending(fastpathv1alpha1.ReasonWaitingForAttachment, "FastPathAttachment db-link is not Ready")}}}
	res, lines, _, err = follow(s, 10*time.Minute)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitTimeout))
	g.Expect(res.Outcome.Reason).To(gomega.Equal(gate.ReasonTimeout))
	g.Expect(res.Elapsed).To(gomega.Equal(10 * time.Minute))
	g.Expect(res.Outcome.Message).To(gomega.Equal("no outcome within 10m0s: still Pending (WaitingForAttachment: FastPathAttachment db-link is not Ready)"))
	g.Expect(lines).To(gomega.HaveLen(3), "following, the one state, the timeout")
}

// The grace counts from when the benchmark became Blocked, and starts over
// when what blocks it was resolved in between: the attachment is missing
// for 30s, exists for 30s (not Ready yet), then is missing again, so the
// benchmark ends a grace after the second time (2m), not after the first.
func TestFollowGraceStartsOverWhenUnblocked(t *testing.T) {
	g := gomega.NewWithT(t)
	s := &script{
		// Benchmark reads 1-15 (0s-28s) and from 31 (60s) on: missing.
		attachment: func(read int) bool { return read > 15 && read <= 30 },
		steps:      []step{{b: pending(fastpathv1alpha1.ReasonWaitingForAttachment, "FastPathAttachment db-link not found")}},
	}
	res, _, _, err := follow(s, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitCouldNotRun))
	g.Expect(res.Elapsed).To(gomega.Equal(2 * time.Minute))

	// Created for good after 30s: the benchmark goes on and succeeds.
	s = &script{attachment: func(read int) bool { return read > 15 }}
	for range 60 {
		s.steps = append(s.steps, step{b: pending(fastpathv1alpha1.ReasonWaitingForAttachment, "FastPathAttachment db-link not found")})
	}
	s.steps = append(s.steps, step{b: succeeded("best fast path 9.00 Gbps: no success criteria")})
	res, _, _, err = follow(s, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitSucceeded))
	g.Expect(res.Elapsed).To(gomega.Equal(120 * time.Second))
}

// The default timeout is the runner Job's deadline for the spec plus the
// start allowance.
func TestFollowDerivesTheTimeoutFromTheSpec(t *testing.T) {
	g := gomega.NewWithT(t)
	b := running(fastpathv1alpha1.ReasonJobRunning, "Job ci-run-1 is running")
	// 1 point on 2 paths, 1 repetition of 10s: 2 × (10s + 5s) + 10m.
	g.Expect(gate.DefaultTimeout(b.Spec)).To(gomega.Equal(2*15*time.Second + 10*time.Minute + gate.StartAllowance))
	res, lines, _, err := follow(&script{steps: []step{{b: b}}}, 0)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitTimeout))
	g.Expect(res.Elapsed).To(gomega.Equal(gate.DefaultTimeout(b.Spec)))
	g.Expect(lines[0]).To(gomega.Equal("[0s] Following FastPathBenchmark apps/ci for up to 20m30s (the runner Job's deadline for its spec plus 10m0s to start; --timeout)"))
}

// Deleted, or deleted and created again, while followed: exit 2.
func TestFollowEndsWhenTheBenchmarkIsDeleted(t *testing.T) {
	g := gomega.NewWithT(t)
	r := running(fastpathv1alpha1.ReasonJobRunning, "Job ci-run-1 is running")
	res, _, _, err := follow(&script{steps: []step{{b: r}, {err: notFound()}}}, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitCouldNotRun))
	g.Expect(res.Outcome.Reason).To(gomega.Equal(gate.ReasonDeleted))

	again := pending(fastpathv1alpha1.ReasonWaitingForAttachment, "Starting a run of generation 1")
	again.UID = "uid-2"
	res, _, _, err = follow(&script{steps: []step{{b: r}, {b: again}, {b: succeeded("ok")}}}, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitCouldNotRun))
	g.Expect(res.Outcome.Message).To(gomega.ContainSubstring("deleted and created again (uid uid-2, was uid-1)"))
}

// Not found at the first read, or a refused read, is an error; other
// failed reads are retried and reported once.
func TestFollowErrors(t *testing.T) {
	g := gomega.NewWithT(t)
	_, _, _, err := follow(&script{steps: []step{{err: notFound()}}}, time.Hour)
	g.Expect(err).To(gomega.MatchError("FastPathBenchmark apps/ci not found"))

	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "fastpath.io", Resource: "fastpathbenchmarks"}, "ci", errors.New("no"))
	_, _, _, err = follow(&script{steps: []step{{b: running(fastpathv1alpha1.ReasonJobRunning, "")}, {err: forbidden}}}, time.Hour)
	g.Expect(apierrors.IsForbidden(err)).To(gomega.BeTrue())

	// The cluster cannot be reached at the start: nothing to wait for.
	flaky := errors.New("connection refused")
	_, _, _, err = follow(&script{steps: []step{{err: flaky}, {b: succeeded("ok")}}}, time.Hour)
	g.Expect(err).To(gomega.MatchError("failed to get FastPathBenchmark apps/ci: connection refused"))

	// Later, while the benchmark runs, it is retried.
	res, lines, _, err := follow(&script{steps: []step{{b: running(fastpathv1alpha1.ReasonJobRunning, "Job ci-run-1 is running")}, {err: flaky}, {err: flaky}, {err: flaky}, {b: succeeded("ok")}}}, time.Hour)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Outcome.Code).To(gomega.Equal(gate.ExitSucceeded))
	g.Expect(lines).To(gomega.Equal([]string{
		"[0s] Following FastPathBenchmark apps/ci for up to 1h0m0s (--timeout)",
		"[0s] Running JobRunning: Job ci-run-1 is running",
		"[2s] Failed to get FastPathBenchmark apps/ci (retrying): connection refused",
		"[8s] Succeeded CriteriaMet: ok",
	}))

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &gate.Follower{Client: &script{steps: []step{{b: running(fastpathv1alpha1.ReasonJobRunning, "")}}}, Clock: newStepClock()}
	_, err = f.Follow(ctx, key, time.Hour)
	g.Expect(err).To(gomega.MatchError(context.Canceled))
}

package gate

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Follow's defaults.
const (
	// DefaultInterval is the time between two reads of the benchmark.
	DefaultInterval = 2 * time.Second
	// DefaultGrace is how long a Blocked benchmark may stay so before the
	// gate gives up on it (ExitCouldNotRun): long enough for objects
	// applied with it to appear and for the garbage collector to remove
	// a deleted namesake's children, short against a benchmark's minutes.
	DefaultGrace = 2 * time.Minute
	// StartAllowance is what DefaultTimeout allows beyond the runner Job's
	// deadline for the benchmark to start: the attachment becoming Ready,
	// VMs booting, netserver pods scheduling.
	StartAllowance = 10 * time.Minute
)

// DefaultTimeout is how long the gate follows a benchmark of spec without
// --timeout: the runner Job's activeDeadlineSeconds for the defaulted spec
// (benchjob.Deadline: every run at its duration plus a per-run overhead,
// plus 10 minutes) plus StartAllowance.
func DefaultTimeout(spec fastpathv1alpha1.FastPathBenchmarkSpec) time.Duration {
	return benchjob.Deadline(fastpathv1alpha1.DefaultBenchmarkSpec(spec)) + StartAllowance
}

// Clock is the time the follower reads and waits on: k8s.io/utils/clock's
// RealClock in the CLI, a clock that steps on After in tests.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// Follower follows one FastPathBenchmark until it ends.
type Follower struct {
	// Client reads the benchmark and, while it waits for its attachment,
	// the attachment.
	Client client.Reader
	Clock  Clock
	// Interval is the time between reads; 0 means DefaultInterval.
	Interval time.Duration
	// Grace is how long a Blocked benchmark may stay Blocked for the same
	// reason before Follow ends with ExitCouldNotRun; 0 ends at once.
	Grace time.Duration
	// Progress receives one line per transition (nil: none).
	Progress io.Writer
}

// Result is how a followed benchmark ended.
type Result struct {
	// Benchmark is the last observation; nil when none succeeded.
	Benchmark *fastpathv1alpha1.FastPathBenchmark
	// Outcome has State Done.
	Outcome Outcome
	// Elapsed is the time from the first read to the end.
	Elapsed time.Duration
}

// Follow reads the benchmark key every Interval until Decide says Done, it
// stays Blocked for Grace (ExitCouldNotRun, the benchmark's reason and
// message), it is deleted or replaced by a namesake (ExitCouldNotRun,
// ReasonDeleted) or timeout passes (ExitTimeout, ReasonTimeout; 0 means
// DefaultTimeout of the first spec read). A benchmark finished already ends
// at the first read. Follow returns an error when the first read fails (the
// benchmark does not exist, the cluster cannot be reached), when a later
// read is refused (Forbidden, Unauthorized) and when ctx ends; later reads
// that fail otherwise are retried until the timeout (an API server
// restarting does not fail a benchmark of hours), each distinct error
// reported once.
func (f *Follower) Follow(ctx context.Context, key types.NamespacedName, timeout time.Duration) (Result, error) {
	interval := f.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	start := f.Clock.Now()
	var (
		res          Result
		lastKey      string
		lastErr      string
		blockedSince time.Time
		blockedOn    string
	)
	for {
		now := f.Clock.Now()
		res.Elapsed = now.Sub(start)
		b := &fastpathv1alpha1.FastPathBenchmark{}
		err := f.Client.Get(ctx, key, b)
		switch {
		case err == nil:
			lastErr = ""
		case apierrors.IsNotFound(err) && res.Benchmark == nil:
			return res, fmt.Errorf("FastPathBenchmark %s not found", key)
		case res.Benchmark == nil:
			return res, fmt.Errorf("failed to get FastPathBenchmark %s: %w", key, err)
		case apierrors.IsNotFound(err):
			return f.end(res, Outcome{State: Done, Code: ExitCouldNotRun, Phase: res.Benchmark.Status.Phase, Reason: ReasonDeleted,
				Message: fmt.Sprintf("FastPathBenchmark %s was deleted while it was followed", key)}), nil
		case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), ctx.Err() != nil:
			return res, fmt.Errorf("failed to get FastPathBenchmark %s: %w", key, err)
		default:
			if msg := err.Error(); msg != lastErr {
				f.printf(res.Elapsed, "Failed to get FastPathBenchmark %s (retrying): %v", key, err)
				lastErr = msg
			}
			b = nil
		}
		if b != nil && res.Benchmark != nil && b.UID != res.Benchmark.UID {
			msg := fmt.Sprintf("FastPathBenchmark %s was deleted and created again (uid %s, was %s) while it was followed", key, b.UID, res.Benchmark.UID)
			res.Benchmark = b
			return f.end(res, Outcome{State: Done, Code: ExitCouldNotRun, Phase: b.Status.Phase, Reason: ReasonDeleted, Message: msg}), nil
		}
		if b != nil {
			if res.Benchmark == nil {
				why := "--timeout"
				if timeout == 0 {
					timeout = DefaultTimeout(b.Spec)
					why = fmt.Sprintf("the runner Job's deadline for its spec plus %s to start; --timeout", StartAllowance)
				}
				f.printf(res.Elapsed, "Following FastPathBenchmark %s for up to %s (%s)", key, timeout, why)
			}
			res.Benchmark = b
			o := Decide(b, f.facts(ctx, b))
			switch {
			case o.State == Blocked && blockedOn != o.Reason:
				blockedSince, blockedOn = now, o.Reason
			case o.State != Blocked:
				blockedOn = ""
			}
			if k := transition(b, o); k != lastKey {
				lastKey = k
				line := fmt.Sprintf("%s %s: %s", dash(string(o.Phase)), dash(o.Reason), o.Message)
				if o.State == Blocked {
					line += fmt.Sprintf(" (exit %d unless that changes within %s)", o.Code, f.Grace)
				}
				f.printf(res.Elapsed, "%s", line)
			}
			if o.State == Done {
				res.Outcome = o
				return res, nil
			}
			if o.State == Blocked && now.Sub(blockedSince) >= f.Grace {
				o.State = Done
				o.Message = fmt.Sprintf("%s (still %s after %s)", o.Message, o.Reason, now.Sub(blockedSince).Round(time.Second))
				return f.end(res, o), nil
			}
		}
		if res.Elapsed >= timeout {
			return f.end(res, timedOut(res.Benchmark, timeout)), nil
		}
		wait := min(interval, timeout-res.Elapsed)
		if blockedOn != "" {
			wait = min(wait, blockedSince.Add(f.Grace).Sub(now))
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-f.Clock.After(wait):
		}
	}
}

// facts looks up what Decide needs beside b: whether the attachment exists,
// while b waits for it. A lookup that fails otherwise than NotFound (e.g.
// Forbidden) leaves the fact unknown, so b keeps waiting.
func (f *Follower) facts(ctx context.Context, b *fastpathv1alpha1.FastPathBenchmark) Facts {
	var facts Facts
	if c := headline(b); b.Status.Phase != fastpathv1alpha1.BenchmarkPending || c == nil || c.Reason != fastpathv1alpha1.ReasonWaitingForAttachment {
		return facts
	}
	a := &fastpathv1alpha1.FastPathAttachment{}
	err := f.Client.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.AttachmentRef.Name}, a)
	facts.AttachmentMissing = apierrors.IsNotFound(err)
	return facts
}

// timedOut is the outcome of a benchmark still undecided after limit.
func timedOut(b *fastpathv1alpha1.FastPathBenchmark, limit time.Duration) Outcome {
	o := Outcome{State: Done, Code: ExitTimeout, Reason: ReasonTimeout, Message: fmt.Sprintf("no outcome within %s", limit)}
	last := Decide(b, Facts{})
	o.Phase = b.Status.Phase
	o.Message += fmt.Sprintf(": still %s", dash(string(b.Status.Phase)))
	if last.Reason != "" {
		o.Message += fmt.Sprintf(" (%s: %s)", last.Reason, last.Message)
	}
	return o
}

// transition identifies the state a progress line reports: the phase, the
// outcome's reason and every condition's type and status. A message that
// changes alone (a Pending benchmark's list of what it waits for) is no
// transition.
func transition(b *fastpathv1alpha1.FastPathBenchmark, o Outcome) string {
	k := fmt.Sprintf("%s/%s/%s", o.State, o.Phase, o.Reason)
	for _, c := range b.Status.Conditions {
		k += fmt.Sprintf(" %s=%s/%s", c.Type, c.Status, c.Reason)
	}
	return k
}

// end prints o, which ends the follow, and returns res with it.
func (f *Follower) end(res Result, o Outcome) Result {
	res.Outcome = o
	f.printf(res.Elapsed, "%s: %s", o.Reason, o.Message)
	return res
}

func (f *Follower) printf(elapsed time.Duration, format string, args ...any) {
	if f.Progress == nil {
		return
	}
	fmt.Fprintf(f.Progress, "[%s] %s\n", elapsed.Round(time.Second), fmt.Sprintf(format, args...))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

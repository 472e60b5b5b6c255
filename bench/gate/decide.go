package gate

import (
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// ExitCode is an exit status of `kubectl fastpath bench run`.
type ExitCode int

// The exit codes; ExitCodes says when each is returned.
const (
	ExitSucceeded      ExitCode = 0
	ExitCriteriaNotMet ExitCode = 1
	ExitCouldNotRun    ExitCode = 2
	ExitTimeout        ExitCode = 3
)

// ExitCodes is the documented table of exit codes, in order: the command's
// help is rendered from it, and a test checks that docs/benchmarks.md lists
// every row.
var ExitCodes = []struct {
	Code       ExitCode
	Name, When string
}{
	{ExitSucceeded, "succeeded", "phase Succeeded (reason CriteriaMet): every success criterion met, or none set; also -f without --wait once the benchmark is created"},
	{ExitCriteriaNotMet, "criteria not met", "phase Failed with reason ThresholdNotMet: the benchmark ran and missed a success criterion (the message gives the numbers)"},
	{ExitCouldNotRun, "could not run", "phase Failed with any other reason (RunnerFailed, NetserverUnreachable, ResultsInvalid, Unsupported, CompareToInvalid, VMsApart); " +
		"still Pending after --grace on something missing (WaitingForAttachment with the attachment absent, SSHKeyMissing, RunnerObjectConflict, WaitingForCompareTo) " +
		"or not observed by the operator; the benchmark deleted or replaced while followed; the file or the API server refused it; " +
		"the benchmark not readable at the start (missing, cluster unreachable; later failed reads are retried); a rejected command line"},
	{ExitTimeout, "timeout", "no outcome within --timeout (default: the runner Job's deadline for the spec plus 10 minutes to start)"},
}

// String is the code's name in ExitCodes.
func (c ExitCode) String() string {
	for _, e := range ExitCodes {
		if e.Code == c {
			return e.Name
		}
	}
	return fmt.Sprintf("exit code %d", int(c))
}

// ExitError ends a command with Code: the mains of kubectl-fastpath and
// fastpath-bench print it (Err, or "exit <code>" without one) and return
// Code as the process's exit status.
type ExitError struct {
	Code ExitCode
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// State is where a benchmark stands for the gate.
type State int

const (
	// Waiting: not decided; it runs, or waits for something under way (VMs
	// booting, netserver pods scheduling, an attachment becoming Ready).
	Waiting State = iota
	// Blocked: Pending on something that does not exist, or not observed by
	// the operator at all. Nothing under way resolves it, though someone
	// may: the follower decides ExitCouldNotRun once it lasts the grace.
	Blocked
	// Done: decided; Outcome.Code is the exit code.
	Done
)

func (s State) String() string {
	switch s {
	case Waiting:
		return "Waiting"
	case Blocked:
		return "Blocked"
	default:
		return "Done"
	}
}

// Reasons of outcomes that no benchmark condition carries.
const (
	// ReasonNotObserved: status does not describe the benchmark's
	// generation yet (fastpath-operator has not reconciled it).
	ReasonNotObserved = "NotObserved"
	// ReasonTimeout: no outcome within the timeout.
	ReasonTimeout = "Timeout"
	// ReasonDeleted: the benchmark was deleted, or replaced by another of
	// the same name, while it was followed.
	ReasonDeleted = "Deleted"
)

// Outcome is the gate's reading of one observation of a benchmark.
type Outcome struct {
	State State
	// Code is the exit code when State is Done, and the one a Blocked
	// benchmark ends with after the grace.
	Code ExitCode
	// Phase is the benchmark's status.phase ("" before the operator wrote
	// one).
	Phase fastpathv1alpha1.BenchmarkPhase
	// Reason and Message are the deciding condition's (Succeeded or Failed
	// once finished, Running before), or one of the Reason constants above.
	Reason, Message string
}

// Facts are what the follower learned beside the benchmark itself.
type Facts struct {
	// AttachmentMissing: a Get of spec.attachmentRef in the benchmark's
	// namespace answered NotFound.
	AttachmentMissing bool
}

// Decide reads one observation of b. In order:
//
//   - status not of the current generation (or no phase): Blocked,
//     NotObserved (the operator has not picked it up);
//   - phase Succeeded: Done, ExitSucceeded;
//   - phase Failed with reason ThresholdNotMet: Done, ExitCriteriaNotMet;
//     with any other reason: Done, ExitCouldNotRun;
//   - phase Pending waiting for something nobody is making: Blocked,
//     ExitCouldNotRun. That is WaitingForAttachment when the attachment
//     does not exist (f.AttachmentMissing; an attachment that exists and is
//     not Ready yet is under way), SSHKeyMissing (the Secret does not
//     exist), RunnerObjectConflict (a runner object of the benchmark's
//     name belongs to someone else, e.g. a deleted namesake whose children
//     the garbage collector has not removed yet) and WaitingForCompareTo
//     (the run to compare with is missing, or has not finished: a pipeline
//     compares with a kept run, not one under way);
//   - anything else (Running, Pending for endpoints): Waiting.
//
// Reason and Message are the deciding condition's: Succeeded or Failed once
// finished, Running before.
func Decide(b *fastpathv1alpha1.FastPathBenchmark, f Facts) Outcome {
	st := &b.Status
	o := Outcome{Phase: st.Phase}
	if st.ObservedGeneration != b.Generation || st.Phase == "" {
		o.State, o.Code, o.Reason = Blocked, ExitCouldNotRun, ReasonNotObserved
		o.Message = fmt.Sprintf("fastpath-operator has not observed generation %d yet (status is of generation %d)", b.Generation, st.ObservedGeneration)
		return o
	}
	cond := func(t string) {
		if c := apimeta.FindStatusCondition(st.Conditions, t); c != nil {
			o.Reason, o.Message = c.Reason, c.Message
		}
	}
	switch st.Phase {
	case fastpathv1alpha1.BenchmarkSucceeded:
		cond(fastpathv1alpha1.SucceededCondition)
		o.State, o.Code = Done, ExitSucceeded
	case fastpathv1alpha1.BenchmarkFailed:
		cond(fastpathv1alpha1.FailedCondition)
		o.State, o.Code = Done, ExitCouldNotRun
		if o.Reason == fastpathv1alpha1.ReasonThresholdNotMet {
			o.Code = ExitCriteriaNotMet
		}
	case fastpathv1alpha1.BenchmarkPending:
		cond(fastpathv1alpha1.RunningCondition)
		if blocking(o.Reason, f) {
			o.State, o.Code = Blocked, ExitCouldNotRun
		}
	default:
		cond(fastpathv1alpha1.RunningCondition)
	}
	return o
}

// blocking reports whether a Pending benchmark with reason waits for
// something that does not exist.
func blocking(reason string, f Facts) bool {
	switch reason {
	case fastpathv1alpha1.ReasonWaitingForAttachment:
		return f.AttachmentMissing
	case fastpathv1alpha1.ReasonSSHKeyMissing, fastpathv1alpha1.ReasonRunnerObjectConflict, fastpathv1alpha1.ReasonWaitingForCompareTo:
		return true
	}
	return false
}

// headline is the condition Decide quotes for b's phase.
func headline(b *fastpathv1alpha1.FastPathBenchmark) *metav1.Condition {
	t := fastpathv1alpha1.RunningCondition
	switch b.Status.Phase {
	case fastpathv1alpha1.BenchmarkSucceeded:
		t = fastpathv1alpha1.SucceededCondition
	case fastpathv1alpha1.BenchmarkFailed:
		t = fastpathv1alpha1.FailedCondition
	}
	return apimeta.FindStatusCondition(b.Status.Conditions, t)
}

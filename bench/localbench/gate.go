package localbench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/benchfig"
	"github.com/fastpath-io/fastpath/bench/gate"
)

// ExitCodes says when `fastpath-bench local` returns each of the CI gate's
// exit codes (gate.ExitCode: the codes and names of `kubectl fastpath bench
// run`). It has no timeout, so it never returns gate.ExitTimeout. Its help
// is rendered from this table, and a test checks that docs/benchmarks.md
// lists every row.
var ExitCodes = []struct {
	Code gate.ExitCode
	When string
}{
	{gate.ExitSucceeded, "every target measured here was met (a target line SKIP, not measurable here, or N/A, measured on something the target is not about, counts neither way); also --help"},
	{gate.ExitCriteriaNotMet, "a target line FAIL: a target of the local benchmark, or of another benchmark's figures file in --out, was measured and missed"},
	{gate.ExitCouldNotRun, "the benchmark could not run or finish: a rejected command line, not root, a path not built, netperf failed, " +
		"a file not written or read (results.json, the report, a figures file, the JUnit XML), or what the run made not removed; target lines already printed stand, the run does not pass"},
}

// Reasons of the local benchmark's JUnit <failure> and <error> types.
const (
	// ReasonTargetMissed: a target was measured and missed.
	ReasonTargetMissed = "TargetMissed"
	// ReasonCouldNotRun: the benchmark could not run or finish.
	ReasonCouldNotRun = "CouldNotRun"
)

// JUnitName is the name of the <testsuites> element of the local
// benchmark's JUnit XML; its one <testsuite> is JUnitSuite.
const (
	JUnitName  = "fastpath-bench local"
	JUnitSuite = "local node benchmark"
)

// Outcome is how one run of the local benchmark ended: what its target
// lines, its exit code (Code) and its JUnit XML (JUnit) say.
type Outcome struct {
	// RunID is the run's ID (Setup.ID), "" when nothing was built.
	RunID string
	// Machine is results.json's machine; zero when nothing was measured.
	Machine results.Machine
	// Started is when the run started; Elapsed how long it took.
	Started time.Time
	Elapsed time.Duration
	// Targets are CheckTargets' verdicts; nil when the run ended before it
	// could judge them.
	Targets []Target
	// Figures are the other benchmarks' figures files found in the output
	// directory; their targets are judged with the run's.
	Figures []benchfig.File
	// Err is why the benchmark could not run or finish; nil when it did.
	Err error
}

// Code is the run's exit code (ExitCodes): ExitCouldNotRun when Err is
// set, whatever the targets say; else ExitCriteriaNotMet when a measured
// target or a figures file's target missed; else ExitSucceeded. A target
// not measured here (Target.Measured false) or not applicable here
// (Target.NotApplicable) neither passes nor fails a run.
func (o Outcome) Code() gate.ExitCode {
	switch {
	case o.Err != nil:
		return gate.ExitCouldNotRun
	case len(o.missed()) > 0:
		return gate.ExitCriteriaNotMet
	}
	return gate.ExitSucceeded
}

// missed names the targets that were measured and missed, in the order of
// the target lines.
func (o Outcome) missed() []string {
	var out []string
	for _, t := range o.Targets {
		if t.Judged() && !t.Pass {
			out = append(out, t.Name())
		}
	}
	for _, f := range o.Figures {
		for _, t := range f.Targets {
			if !t.Pass() {
				out = append(out, figureName(t))
			}
		}
	}
	return out
}

// count is the number of target lines: the run's and the figures files'.
func (o Outcome) count() int {
	n := len(o.Targets)
	for _, f := range o.Figures {
		n += len(f.Targets)
	}
	return n
}

// ExitError is nil for ExitSucceeded, else a *gate.ExitError with Code and
// what decided it: Err, or the missed targets by name.
func (o Outcome) ExitError() error {
	switch code := o.Code(); code {
	case gate.ExitSucceeded:
		return nil
	case gate.ExitCriteriaNotMet:
		m := o.missed()
		return &gate.ExitError{Code: code, Err: fmt.Errorf("%d of %d targets missed: %s", len(m), o.count(), strings.Join(m, ", "))}
	default:
		return &gate.ExitError{Code: code, Err: o.Err}
	}
}

// JUnit renders o as JUnit XML (gate.RenderJUnit): one <testsuite>
// JUnitSuite with the exit code, run ID and machine as <properties>, and
// these testcases:
//
//   - local.benchmark/run: the run itself; an <error> (type CouldNotRun)
//     with Err when it could not run or finish;
//   - local.targets/<kind> <path>/<reference> (Target.Name): one per target
//     line; a <failure> (type TargetMissed) with the measured and the
//     required ratio when missed, <skipped> with the reason when not
//     measured here or not applicable here (never a pass, never a
//     failure; a not applicable one keeps its measured ratio in its
//     <properties>), and every target of
//     the table <skipped> as "not judged" when the run ended before
//     judging them;
//   - <benchmark>.targets/<kind> <name>: one per target of a figures file
//     (benchfig.Target), a <failure> when missed.
//
// The measured, required, min and max ratios and the pairs are
// <properties>, never names, so CI tracks each testcase from run to run.
// The suite fails (failures + errors > 0) exactly when Code is not 0.
func (o Outcome) JUnit() ([]byte, error) {
	code := o.Code()
	s := gate.Testsuite{Name: JUnitSuite, Timestamp: o.Started, Seconds: o.Elapsed.Seconds(), Properties: gate.Props(
		"exitCode", strconv.Itoa(int(code)), "outcome", code.String(), "runID", o.RunID,
		"hostname", o.Machine.Hostname, "kernel", o.Machine.Kernel, "cpus", count(o.Machine.CPUs),
		"netperf", o.Machine.Netperf, "emulated", o.Machine.Emulated)}
	run := gate.Testcase{Name: "run", Classname: "local.benchmark", Seconds: s.Seconds}
	if o.Err != nil {
		run.Error = &gate.Problem{Type: ReasonCouldNotRun, Message: fmt.Sprintf("%s: %v", code, o.Err), Text: o.Err.Error()}
	} else {
		run.SystemOut = fmt.Sprintf("local node benchmark %s: exit %d, %s", o.RunID, code, code)
	}
	s.Cases = append(s.Cases, run)
	if o.Targets == nil {
		for _, t := range append(append([]Target(nil), targets...), cpuTargets...) {
			c := targetCase(t)
			c.Skipped = "not judged: the benchmark could not run"
			s.Cases = append(s.Cases, c)
		}
	}
	for _, t := range o.Targets {
		s.Cases = append(s.Cases, targetCase(t))
	}
	for _, f := range o.Figures {
		for _, t := range f.Targets {
			s.Cases = append(s.Cases, figureCase(f.Benchmark, t))
		}
	}
	return gate.RenderJUnit(JUnitName, []gate.Testsuite{s})
}

// targetCase is a target line's testcase: passed, a <failure> or
// <skipped> with the reason it was not measured.
func targetCase(t Target) gate.Testcase {
	_, op := t.kind()
	required := ratio(t.Want)
	c := gate.Testcase{Name: t.Name(), Classname: "local.targets",
		Properties: gate.Props("path", t.Path, "reference", t.Reference, "bound", op, "required", required, "unit", "ratio")}
	if !t.Measured {
		c.Skipped = t.Detail
		return c
	}
	lo, hi, pairs := t.Min, t.Max, t.Pairs
	if t.CPU {
		lo, hi, pairs = t.Spread.Min, t.Spread.Max, t.Spread.Pairs
	}
	measured := ratio(t.Got)
	c.Properties = append(c.Properties, gate.Props("measured", measured, "min", ratio(lo), "max", ratio(hi), "pairs", count(pairs))...)
	if t.NotApplicable != "" {
		// Measured, kept as information, never a pass or a failure.
		c.Skipped = t.naReason()
		return c
	}
	if t.Pass {
		c.SystemOut = t.String()
		return c
	}
	c.Failure = &gate.Problem{Type: ReasonTargetMissed, Text: t.Detail,
		Message: t.Name() + ": " + gate.Compare(gate.Criterion{Required: required, Measured: measured, Max: op == "<="})}
	return c
}

// figureCase is the testcase of a target of another benchmark's figures
// file.
func figureCase(benchmark string, t benchfig.Target) gate.Testcase {
	required, measured := ratio(t.Goal), ratio(t.Value)
	c := gate.Testcase{Name: figureName(t), Classname: benchmark + ".targets",
		Properties: gate.Props("bound", t.Op(), "required", required, "measured", measured)}
	if t.Pass() {
		c.SystemOut = t.String()
		return c
	}
	c.Failure = &gate.Problem{Type: ReasonTargetMissed, Text: t.Detail,
		Message: figureName(t) + ": " + gate.Compare(gate.Criterion{Required: required, Measured: measured, Max: t.Op() == "<="})}
	return c
}

// figureName is a figures file's target as its line names it: "<kind> <name>".
func figureName(t benchfig.Target) string { return t.Kind + " " + t.Name }

// ratio renders a ratio as the target lines do, with two decimals.
func ratio(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// count renders n, "" for 0 (left out of the properties).
func count(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

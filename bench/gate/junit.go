package gate

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Report is one followed benchmark, as the outputs render it.
type Report struct {
	// Benchmark is the last observation (not nil).
	Benchmark *fastpathv1alpha1.FastPathBenchmark
	// Outcome is how the gate decided (State Done).
	Outcome Outcome
	// Criteria are the verdicts on the success criteria, judged from the
	// run's results.json; nil when not judged (no results, or they could
	// not be read), in which case the condition's reason and message stand
	// for them.
	Criteria []Criterion
	// Results is the run's results.json; nil when the benchmark has none
	// or they could not be read.
	Results *results.Document
	// Elapsed is how long the gate followed the benchmark; the JUnit time
	// when status has no start and completion time.
	Elapsed time.Duration
}

// Testsuite is one <testsuite> of a JUnit document (RenderJUnit): one run
// of something, with its testcases. Its tests, failures, errors and skipped
// counts are counted from Cases.
type Testsuite struct {
	// Name identifies the run from run to run (no figures in it), e.g.
	// "apps/db-link-ci" or "fastpath-bench local".
	Name string
	// Timestamp is when the run started; the zero time leaves it out.
	Timestamp time.Time
	// Seconds is how long the run took.
	Seconds float64
	// Properties are the run's figures; pairs with an empty Value are left
	// out, and <properties> with them when none is left.
	Properties []Property
	Cases      []Testcase
}

// Testcase is one <testcase>. It passed when Failure, Error and Skipped are
// all unset; a reader counts it under the first of them that is set.
type Testcase struct {
	// Name and Classname identify the testcase from run to run: the figures
	// go into Properties and messages, never into names.
	Name, Classname string
	// Seconds is its time attribute; 0 leaves the attribute out.
	Seconds float64
	// Properties are its figures, as Testsuite.Properties.
	Properties []Property
	// Failure: it ran and missed what it had to meet. Error: it could not
	// run or finish.
	Failure, Error *Problem
	// Skipped is why it was not judged; not empty marks it <skipped>.
	Skipped string
	// SystemOut is shown beside the testcase, e.g. a passed verdict's line.
	SystemOut string
}

// Problem is a <failure> or <error>.
type Problem struct {
	// Type is the kind of problem, e.g. a condition reason such as
	// ThresholdNotMet.
	Type string
	// Message is the line reporters show; Text the detail under it.
	Message, Text string
}

// Property is a name/value pair of <properties>.
type Property struct{ Name, Value string }

// Props pairs its arguments as name, value, name, value, ...: Props("a",
// "1", "b", "") is [{a 1} {b }]. A trailing name without a value is
// dropped.
func Props(kv ...string) []Property {
	var ps []Property
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, Property{Name: kv[i], Value: kv[i+1]})
	}
	return ps
}

// RenderJUnit renders suites as a JUnit XML document (<testsuites name=name>)
// with the counts a reader relies on: tests, failures, errors and skipped
// per suite and in total, times in seconds with three decimals. The only
// error is one of encoding/xml.
func RenderJUnit(name string, suites []Testsuite) ([]byte, error) {
	doc := junitTestsuites{Name: name}
	var total float64
	for _, s := range suites {
		x := junitTestsuite{Name: s.Name, junitCounts: junitCounts{Time: seconds(s.Seconds)}, Properties: properties(s.Properties)}
		if !s.Timestamp.IsZero() {
			x.Timestamp = s.Timestamp.UTC().Format("2006-01-02T15:04:05")
		}
		for _, c := range s.Cases {
			tc := junitTestcase{Name: c.Name, Classname: c.Classname, Properties: properties(c.Properties), SystemOut: c.SystemOut,
				Failure: problem(c.Failure), Error: problem(c.Error)}
			if c.Seconds != 0 {
				tc.Time = seconds(c.Seconds)
			}
			if c.Skipped != "" {
				tc.Skipped = &junitSkipped{Message: c.Skipped}
			}
			x.Cases = append(x.Cases, tc)
			x.Tests++
			switch {
			case tc.Failure != nil:
				x.Failures++
			case tc.Error != nil:
				x.Errors++
			case tc.Skipped != nil:
				x.Skipped++
			}
		}
		doc.Suites = append(doc.Suites, x)
		doc.Tests += x.Tests
		doc.Failures += x.Failures
		doc.Errors += x.Errors
		doc.Skipped += x.Skipped
		total += s.Seconds
	}
	doc.Time = seconds(total)
	out, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("failed to render JUnit XML: %w", err)
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

func problem(p *Problem) *junitProblem {
	if p == nil {
		return nil
	}
	return &junitProblem{Message: p.Message, Type: p.Type, Text: p.Text}
}

// properties makes <properties> of ps, leaving out empty values; nil when
// all are.
func properties(ps []Property) *junitProperties {
	var out junitProperties
	for _, p := range ps {
		if p.Value != "" {
			out.Property = append(out.Property, junitProperty(p))
		}
	}
	if len(out.Property) == 0 {
		return nil
	}
	return &out
}

// The JUnit XML document: the element and attribute names of Ant's JUnit
// report (testsuites > testsuite > properties, testcase > failure | error
// | skipped, system-out), which GitHub Actions' JUnit reporters, GitLab's
// unit test reports and Jenkins' junit step read. A testcase's
// <properties> is an extension (pytest's record_property writes it too):
// Jenkins and most reporters show it, readers that do not ignore it.
type (
	junitTestsuites struct {
		XMLName xml.Name `xml:"testsuites"`
		Name    string   `xml:"name,attr"`
		junitCounts
		Suites []junitTestsuite `xml:"testsuite"`
	}
	// junitCounts are the attributes <testsuites> and <testsuite> share.
	junitCounts struct {
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Time     string `xml:"time,attr"`
	}
	junitTestsuite struct {
		Name string `xml:"name,attr"`
		junitCounts
		Timestamp  string           `xml:"timestamp,attr,omitempty"`
		Properties *junitProperties `xml:"properties,omitempty"`
		Cases      []junitTestcase  `xml:"testcase"`
	}
	junitProperties struct {
		Property []junitProperty `xml:"property"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitTestcase struct {
		Name       string           `xml:"name,attr"`
		Classname  string           `xml:"classname,attr"`
		Time       string           `xml:"time,attr,omitempty"`
		Properties *junitProperties `xml:"properties,omitempty"`
		Failure    *junitProblem    `xml:"failure,omitempty"`
		Error      *junitProblem    `xml:"error,omitempty"`
		Skipped    *junitSkipped    `xml:"skipped,omitempty"`
		SystemOut  string           `xml:"system-out,omitempty"`
	}
	junitProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
	junitSkipped struct {
		Message string `xml:"message,attr"`
	}
)

// JUnitName is the name of the <testsuites> element.
const JUnitName = "kubectl fastpath bench run"

// JUnit renders reports as a JUnit XML document: one <testsuite> per
// benchmark, named <namespace>/<name>, with its status figures as
// <properties> and these testcases (classname <namespace>/<name>.<group>):
//
//   - benchmark/run: the run itself; an <error> when it could not run
//     (ExitCouldNotRun, the reason as its type) or timed out (ExitTimeout);
//   - successCriteria/<field>: one per criterion in Report.Criteria, a
//     <failure> (type ThresholdNotMet) with the measured and the required
//     figure when missed. Not judged, a set of criteria is one testcase
//     successCriteria/all: passed (Succeeded), a <failure> with the
//     condition's message (ThresholdNotMet), else <skipped>;
//   - points/<test sock= msg= sessions= pairs=>: one per status.points
//     entry, its figures as <properties> (the status field names); these
//     always pass;
//   - comparison/<path> <test sock= ...>: one per status.comparison entry
//     (spec.compareTo), this run's and the compared run's throughput, their
//     ratio and noise verdict, the CPU ratio as <properties>; these always
//     pass, successCriteria/maxRegressionPercent fails for them.
//
// Names stay the same from run to run, so CI tracks each over time: the
// figures are in properties and messages, never in names. A report fails
// (failures + errors > 0) exactly when its exit code is not 0.
func JUnit(reports []Report) ([]byte, error) {
	suites := make([]Testsuite, 0, len(reports))
	for _, r := range reports {
		suites = append(suites, testsuite(r))
	}
	return RenderJUnit(JUnitName, suites)
}

func testsuite(r Report) Testsuite {
	b, o := r.Benchmark, r.Outcome
	id := b.Namespace + "/" + b.Name
	s := Testsuite{Name: id, Seconds: runSeconds(r)}
	switch {
	case b.Status.StartTime != nil:
		s.Timestamp = b.Status.StartTime.Time
	case !b.CreationTimestamp.IsZero():
		s.Timestamp = b.CreationTimestamp.Time
	}
	s.Properties = Props(
		"exitCode", strconv.Itoa(int(o.Code)), "outcome", o.Code.String(),
		"phase", string(o.Phase), "reason", o.Reason, "message", o.Message,
		"bestGbps", b.Status.BestGbps, "speedup", b.Status.Speedup, "cpuRatio", b.Status.CPURatio,
		"attachment", b.Spec.AttachmentRef.Name, "mode", string(b.Spec.Mode),
		"generation", strconv.FormatInt(b.Generation, 10), "jobName", b.Status.JobName, "resultsConfigMap", b.Status.ResultsConfigMap,
		"comparedTo", b.Status.ComparedTo)

	run := Testcase{Name: "run", Classname: id + ".benchmark", Seconds: s.Seconds, SystemOut: headlineText(o)}
	if o.Code == ExitCouldNotRun || o.Code == ExitTimeout {
		run.Error = &Problem{Type: o.Reason, Message: fmt.Sprintf("%s (%s): %s", o.Code, o.Reason, o.Message), Text: o.Message}
		run.SystemOut = ""
	}
	s.Cases = append(s.Cases, run)
	s.Cases = append(s.Cases, criteriaCases(id+".successCriteria", b, o, r.Criteria)...)
	for _, p := range b.Status.Points {
		s.Cases = append(s.Cases, pointCase(id+".points", p))
	}
	for _, p := range b.Status.Comparison {
		s.Cases = append(s.Cases, comparedCase(id+".comparison", p))
	}
	return s
}

// criteriaCases are the success criteria's testcases.
func criteriaCases(class string, b *fastpathv1alpha1.FastPathBenchmark, o Outcome, criteria []Criterion) []Testcase {
	var out []Testcase
	for _, c := range criteria {
		tc := Testcase{Name: c.Name, Classname: class, SystemOut: c.Text,
			Properties: Props("required", c.Required, "measured", c.Measured, "unit", c.Unit)}
		if !c.Met {
			tc.Failure = &Problem{Type: fastpathv1alpha1.ReasonThresholdNotMet, Message: c.Name + ": " + Compare(c), Text: c.Text}
			tc.SystemOut = ""
		}
		out = append(out, tc)
	}
	if criteria != nil || !hasCriteria(b.Spec.SuccessCriteria) {
		return out
	}
	tc := Testcase{Name: "all", Classname: class}
	switch o.Code {
	case ExitSucceeded:
		tc.SystemOut = o.Message
	case ExitCriteriaNotMet:
		tc.Failure = &Problem{Type: o.Reason, Message: o.Message, Text: o.Message}
	default:
		tc.Skipped = fmt.Sprintf("not judged: the benchmark has no results (%s)", o.Reason)
	}
	return append(out, tc)
}

func hasCriteria(c *fastpathv1alpha1.SuccessCriteria) bool {
	return c != nil && (c.MinThroughputMbps != nil || c.MinSpeedupPercent != nil || c.MaxCPURatio != "" || c.MaxRegressionPercent != nil)
}

// Compare words a criterion's figures: "measured 294.5%, required at least
// 300%", or "nothing measured (no baseline at the best point), required at
// least 100%".
func Compare(c Criterion) string {
	bound := "at least"
	if c.Max {
		bound = "at most"
	}
	got := "measured " + withUnit(c.Measured, c.Unit)
	if c.Measured == "" {
		got = "nothing measured"
		if c.Why != "" {
			got += " (" + c.Why + ")"
		}
	}
	return fmt.Sprintf("%s, required %s %s", got, bound, withUnit(c.Required, c.Unit))
}

func withUnit(v, unit string) string {
	switch unit {
	case "":
		return v
	case "%":
		return v + "%"
	}
	return v + " " + unit
}

// pointCase is one matrix point: named as results.Point names it, its
// figures under the status field names.
func pointCase(class string, p fastpathv1alpha1.BenchmarkPoint) Testcase {
	name := results.Point{Test: string(p.Test), SocketBytes: int(p.SocketBytes), MessageBytes: int(p.MessageBytes), Sessions: int(p.Sessions), Pairs: int(p.Pairs)}.String()
	var perPair []string
	for _, v := range p.FastPathPerPairMbps {
		perPair = append(perPair, strconv.FormatInt(v, 10))
	}
	return Testcase{Name: name, Classname: class, Properties: Props(
		"fastPathMbps", count(p.FastPathMbps), "fastPathPerPairMbps", strings.Join(perPair, ","), "baselineMbps", count(p.BaselineMbps),
		"speedupPercent", count(int64(p.SpeedupPercent)),
		"fastPathLatency", duration(p.FastPathLatency), "baselineLatency", duration(p.BaselineLatency),
		"fastPathServiceDemandUsPerKB", p.FastPathServiceDemandUsPerKB, "baselineServiceDemandUsPerKB", p.BaselineServiceDemandUsPerKB,
		"fastPathHostCPUSecondsPerGB", p.FastPathHostCPUSecondsPerGB, "baselineHostCPUSecondsPerGB", p.BaselineHostCPUSecondsPerGB,
		"fastPathGbpsPerHostCore", p.FastPathGbpsPerHostCore, "baselineGbpsPerHostCore", p.BaselineGbpsPerHostCore,
		"cpuRatio", p.CPURatio, "fastPathLossPercent", p.FastPathLossPercent, "baselineLossPercent", p.BaselineLossPercent)}
}

// comparedCase is one path at one matrix point beside the run of
// spec.compareTo: named "<path> <point>", its figures under the status
// field names. It always passes: maxRegressionPercent judges them.
func comparedCase(class string, p fastpathv1alpha1.ComparedPoint) Testcase {
	name := p.Path + " " + results.Point{Test: string(p.Test), SocketBytes: int(p.SocketBytes), MessageBytes: int(p.MessageBytes), Sessions: int(p.Sessions), Pairs: int(p.Pairs)}.String()
	return Testcase{Name: name, Classname: class, Properties: Props(
		"mbps", count(p.Mbps), "comparedMbps", count(p.ComparedMbps), "throughputRatio", p.ThroughputRatio, "throughputNoise", string(p.ThroughputNoise),
		"cpuRatio", p.CPURatio, "cpuNoise", string(p.CPUNoise))}
}

func count(v int64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatInt(v, 10)
}

func duration(d *metav1.Duration) string {
	if d == nil {
		return ""
	}
	return d.Duration.String()
}

// runSeconds is the run's time: status startTime to completionTime, else
// how long the gate followed it.
func runSeconds(r Report) float64 {
	st := r.Benchmark.Status
	if st.StartTime != nil && st.CompletionTime != nil {
		return st.CompletionTime.Sub(st.StartTime.Time).Seconds()
	}
	return r.Elapsed.Seconds()
}

func seconds(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

// headlineText is "<phase> (<reason>): <message>".
func headlineText(o Outcome) string {
	return fmt.Sprintf("%s (%s): %s", dash(string(o.Phase)), dash(o.Reason), o.Message)
}

package e2e

import (
	"fmt"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
)

// FailuresFileEnv names the file that the suite writes its failures to
// (make e2e-cluster sets it under the cluster's logs/ and prints the file
// after the cluster is down, so that the last lines of a CI log say what
// failed and why, not only where).
const FailuresFileEnv = "FASTPATH_E2E_FAILURES"

// maxFailureLines bounds the lines of one failure message in the summary:
// the message of an Eventually ends with the last assertion that failed,
// which is the line a reader needs.
const maxFailureLines = 12

// failureSummary returns the random seed (the order Ginkgo ran the
// containers in; -ginkgo.seed repeats it) and, per spec that failed,
// panicked, was interrupted or timed out: its name, where it failed and the
// head and tail of its message. It returns "" when nothing failed.
func failureSummary(r types.Report) string {
	var b strings.Builder
	n := 0
	for _, s := range r.SpecReports {
		if !s.State.Is(types.SpecStateFailureStates) {
			continue
		}
		n++
		name := strings.TrimSpace(strings.Join(s.ContainerHierarchyTexts, " ") + " " + s.LeafNodeText)
		if name == "" {
			name = s.LeafNodeType.String()
		}
		fmt.Fprintf(&b, "%d. [%s] %s (after %.0fs)\n   at %s\n", n, s.State, name, s.RunTime.Seconds(), s.Failure.Location)
		lines := strings.Split(strings.TrimRight(s.Failure.Message, "\n"), "\n")
		if len(lines) > maxFailureLines {
			omitted := len(lines) - maxFailureLines
			lines = append(append(lines[:maxFailureLines/2:maxFailureLines/2], fmt.Sprintf("[%d lines]", omitted)), lines[len(lines)-maxFailureLines/2:]...)
		}
		for _, l := range lines {
			fmt.Fprintf(&b, "   | %s\n", l)
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%s: %d failed (random seed %d: -ginkgo.seed=%d runs the containers in the same order)\n%s",
		r.SuiteDescription, n, r.SuiteConfig.RandomSeed, r.SuiteConfig.RandomSeed, b.String())
}

var _ = ReportAfterSuite("failures", func(r Report) {
	path := os.Getenv(FailuresFileEnv)
	if path == "" {
		return
	}
	s := failureSummary(r)
	if s == "" {
		_ = os.Remove(path)
		return
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: writing %s: %v\n", path, err)
	}
})

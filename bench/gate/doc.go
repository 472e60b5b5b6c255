// Package gate is the CI gate of `kubectl fastpath bench run`: it follows a
// FastPathBenchmark until it ends and turns it into an exit code, a text
// summary and JUnit XML.
//
//   - Decide (decide.go) maps one observation of a benchmark to an Outcome:
//     still running, blocked on something missing, or done with one of the
//     exit codes of ExitCodes (0 succeeded, 1 criteria not met, 2 could not
//     run, 3 timeout). It is pure: the table test drives it.
//   - Follower (follow.go) polls the benchmark through a client.Reader,
//     prints one progress line per phase or condition transition, applies
//     the grace to a blocked benchmark and the timeout. Its clock is
//     injected, so tests step time without sleeping.
//   - JUnit (junit.go) renders finished benchmarks as JUnit XML (testsuites,
//     one testsuite per benchmark, a testcase for the run, one per success
//     criterion and one per matrix point of status), the shape GitHub
//     Actions' reporters, GitLab and Jenkins read; Write (output.go) renders
//     text, JSON, YAML or JUnit. RenderJUnit, under it, renders any
//     Testsuite: the local benchmark (bench/localbench) renders its target
//     lines with it, and exits with the same ExitCode values through
//     ExitError.
//   - DecodeBenchmark and Namespace (file.go) read the benchmark of -f.
//
// The criteria verdicts come from the operator's own judgement
// (controllers/benchmark/summary.Judge over the run's results.json),
// which the CLI's main copies into Criterion: bench/ is a part of its own and
// imports none of the operator's packages (docs/architecture.md, "Layers").
package gate

// Package summary turns a runner's results document (api/benchjob/results)
// into the bounded summary a FastPathBenchmark keeps in its status, and judges
// it against the benchmark's success criteria (Judge: one Verdict per
// criterion, which the operator's message and `kubectl fastpath bench run`
// both quote; Evaluate). It is pure: no API server, no clock.
//
// The summary is quoted at single-pair points (pairs 1): those are comparable
// between benchmarks; scale-out points (pairs N) appear in status.points with
// their aggregate and per-pair throughput, and in full in the ConfigMap.
package summary

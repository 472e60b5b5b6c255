// Package sweep is the arithmetic of a FastPathNetwork's self-tuning sweep
// (issue 27, docs/design.md §5.5): the order in which candidates alternate,
// the evidence of one candidate from its repetitions (median with min and
// max), and the choice of the winner by the objective. Everything here is a
// pure function; the controller in controllers/tuning runs the measurements
// as FastPathBenchmarks and feeds their results in.
package sweep

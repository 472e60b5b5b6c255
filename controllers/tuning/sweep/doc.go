// Package sweep is the arithmetic of a FastPathNetwork's self-tuning sweep
// (issue 27, docs/design.md §5.5): the order in which candidates alternate,
// the evidence of one candidate from its repetitions (median with min and
// max, and the offloads its path negotiated against those it asked for,
// issue 41), the choice of the winner by the objective, and the
// recommendation, which takes the smallest MTU when the MTU curve is flat
// within noise. Everything here is a pure function; the controller in
// controllers/tuning runs the measurements as FastPathBenchmarks and feeds
// their results in.
package sweep

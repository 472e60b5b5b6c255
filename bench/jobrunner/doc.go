// Package jobrunner is the runner's half of the FastPathBenchmark Job
// contract (api/benchjob holds the controller's half): it parses the command
// line the controller renders (RunnerFlags, ParseRunnerArgs, into a
// bench.RunConfig; runner.go), runs the matrix (RunnerConfig.Execute), and
// writes the outcome to the results ConfigMap (ConfigMapSink, OutcomeData;
// outcome.go), whose keys and reasons api/benchjob defines. Only
// fastpath-bench links it; the operator reads the outcome with
// benchjob.ReadOutcome.
package jobrunner

package netperf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
)

// RunGrace is added to a test's duration to bound the whole netperf run:
// control connection setup, socket setup on both ends and the final result
// exchange take well under a second on a working path, while a path that
// drops packets would otherwise block in connect() for TCP's SYN retry time
// (about 127 s with Linux's default tcp_syn_retries=6).
const RunGrace = 30 * time.Second

// Run runs the netperf client described by spec through ex and returns its
// parsed result. Failures are *RunError values wrapping one of the Err*
// sentinels (see Diagnose and Parse); an invalid spec is returned as is. The
// run is bounded by spec.Timeout (default spec.Duration + RunGrace) and ctx.
func Run(ctx context.Context, ex Executor, spec Spec) (Result, error) {
	argv, err := spec.Command()
	if err != nil {
		return Result{}, err
	}
	fail := func(err error) (Result, error) {
		return Result{}, &RunError{Endpoint: spec.Endpoint(), Executor: ex.String(), Command: argv, Err: err}
	}
	limit := spec.Timeout
	if limit <= 0 {
		limit = spec.Duration + RunGrace
	}
	runCtx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	stdout, stderr, runErr := ex.Run(runCtx, argv)
	if ctx.Err() != nil {
		return fail(fmt.Errorf("interrupted: %w", ctx.Err()))
	}
	if errors.Is(runCtx.Err(), context.DeadlineExceeded) {
		return fail(fmt.Errorf("%w: no result after %s; are packets to %s dropped?", ErrTimeout, limit, spec.Host))
	}
	if d := Diagnose(stdout, stderr, runErr); d != nil {
		return fail(d)
	}
	if runErr != nil {
		return fail(fmt.Errorf("%w: %v: %s", ErrFailed, runErr, excerpt(string(stdout)+" "+string(stderr))))
	}
	res, err := Parse(spec.Test, stdout)
	if err != nil {
		return fail(err)
	}
	res.CPUScope = results.CPUScopeEndpoints
	if spec.SameHost {
		res.CPUScope = results.CPUScopeHost
	}
	return res, nil
}

// Version returns the first line of `netperf -V` run through ex, e.g.
// "Netperf version 2.7.0"; binary empty means DefaultBinary.
func Version(ctx context.Context, ex Executor, binary string) (string, error) {
	if binary == "" {
		binary = DefaultBinary
	}
	argv := []string{binary, "-V"}
	ctx, cancel := context.WithTimeout(ctx, RunGrace)
	defer cancel()
	stdout, stderr, err := ex.Run(ctx, argv)
	if err != nil {
		if d := Diagnose(stdout, stderr, err); d != nil {
			err = d
		} else if e := excerpt(string(stderr)); e != "" {
			// ssh's own failures (exit 255) say why only on stderr.
			err = fmt.Errorf("%w: %s", err, e)
		}
		return "", fmt.Errorf("failed to get netperf version via %s (%s): %w", ex, strings.Join(argv, " "), err)
	}
	v := lastLine(string(stdout))
	if !strings.HasPrefix(v, "Netperf version") {
		return "", fmt.Errorf("failed to get netperf version via %s: %w: %q", ex, ErrUnparsable, excerpt(string(stdout)))
	}
	return v, nil
}

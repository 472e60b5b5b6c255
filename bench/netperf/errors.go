package netperf

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
)

// Sentinel errors a *RunError wraps; test with errors.Is.
var (
	// ErrNetperfMissing: the netperf binary is not installed where the
	// executor runs it.
	ErrNetperfMissing = errors.New("netperf is not installed")
	// ErrNetserverUnreachable: netperf could not open its control connection,
	// so no netserver is listening at the endpoint or it cannot be reached.
	ErrNetserverUnreachable = errors.New("netserver is not answering")
	// ErrHostUnresolvable: getaddrinfo failed for the host (also for literal
	// addresses in a network namespace that has only loopback).
	ErrHostUnresolvable = errors.New("host does not resolve")
	// ErrUnknownTest: the test name is not one netperf (or this package) knows.
	ErrUnknownTest = errors.New("unknown test")
	// ErrConnectionLost: the netserver went away in the middle of the test.
	ErrConnectionLost = errors.New("connection to netserver lost during the test")
	// ErrTimeout: netperf did not finish within the test duration plus RunGrace.
	ErrTimeout = errors.New("netperf did not finish in time")
	// ErrUnparsable: netperf exited successfully but its output is not a
	// result this package understands.
	ErrUnparsable = errors.New("netperf output not understood")
	// ErrFailed: netperf failed in a way none of the above describes.
	ErrFailed = errors.New("netperf failed")
)

// RunError is the error of a failed netperf run. Err wraps one of the
// sentinels above and carries the line of output that explains it.
type RunError struct {
	// Endpoint is the netserver, "host:port".
	Endpoint string
	// Executor says where netperf ran (Executor.String()).
	Executor string
	// Command is the netperf argv.
	Command []string
	// Err is the cause.
	Err error
}

func (e *RunError) Error() string {
	return fmt.Sprintf("failed to run netperf against %s via %s (%s): %v", e.Endpoint, e.Executor, strings.Join(e.Command, " "), e.Err)
}

func (e *RunError) Unwrap() error { return e.Err }

// diagnosis is one known failure: a line of output containing any of match
// means err.
type diagnosis struct {
	match []string
	err   error
}

// diagnoses are checked in order; the strings come from the outputs captured
// in testdata/ (Debian netperf 2.7.0, iproute2, dash).
var diagnoses = []diagnosis{
	// `ip netns exec` without the binary.
	{[]string{`failed: No such file or directory`}, ErrNetperfMissing},
	// resolve_host: could not resolve host 'no-such-host.invalid' port '(null)' af AF_UNSPEC
	{[]string{"could not resolve"}, ErrHostUnresolvable},
	// establish control: are you sure there is a netserver listening on 127.0.0.1 at port 22866?
	{[]string{"establish control", "establish_control"}, ErrNetserverUnreachable},
	// The test you requested (TCP_FOO) is unknown to this netperf.
	{[]string{"is unknown to this netperf"}, ErrUnknownTest},
	// recv_response: partial response received: 0 bytes
	// netperf: send_omni: recv_data failed: Connection reset by peer
	{[]string{"partial response received", "recv_data failed", "send_data failed", "Connection reset by peer", "Broken pipe"}, ErrConnectionLost},
}

// Diagnose explains a failed or suspicious netperf run from its stdout,
// stderr and the executor's error: it returns an error wrapping one of the
// sentinels with the output line that shows it, or nil when it recognises
// nothing. netperf prints its own errors on stdout; executors (ip netns
// exec, sh, ssh) print theirs on stderr, so both are searched.
func Diagnose(stdout, stderr []byte, runErr error) error {
	if errors.Is(runErr, exec.ErrNotFound) || errors.Is(runErr, fs.ErrNotExist) {
		return fmt.Errorf("%w: %v", ErrNetperfMissing, runErr)
	}
	lines := strings.Split(string(stderr)+"\n"+string(stdout), "\n")
	var exitErr *exec.ExitError
	if errors.As(runErr, &exitErr) && exitErr.ExitCode() == 127 {
		// A shell (sh -c, ssh) that could not find the command: "sh: 1:
		// netperf: not found", "bash: line 1: netperf: command not found".
		return fmt.Errorf("%w: %s", ErrNetperfMissing, firstLine(lines, "not found", "exit status 127"))
	}
	for _, d := range diagnoses {
		for _, l := range lines {
			for _, m := range d.match {
				if strings.Contains(l, m) {
					return fmt.Errorf("%w: %s", d.err, strings.TrimSpace(l))
				}
			}
		}
	}
	if errors.As(runErr, &exitErr) {
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGPIPE {
			return fmt.Errorf("%w: netperf was killed by SIGPIPE writing to a closed connection", ErrConnectionLost)
		}
	}
	return nil
}

// firstLine returns the first non-blank line containing match, or def.
func firstLine(lines []string, match, def string) string {
	for _, l := range lines {
		if strings.Contains(l, match) && strings.TrimSpace(l) != "" {
			return strings.TrimSpace(l)
		}
	}
	return def
}

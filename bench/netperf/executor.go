package netperf

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// Executor runs a command somewhere: on this machine, in a network
// namespace, in a VM over SSH, in a pod. The netperf runner, the local node
// benchmark and the FastPathBenchmark Job all drive netperf through one.
//
// Run runs argv (argv[0] is the program) to completion and returns what it
// wrote to stdout and stderr. err is nil only when the command ran and
// exited 0; an *exec.ExitError (or an error wrapping one) reports a non-zero
// exit, and exec.ErrNotFound a missing program, so Diagnose can tell the
// cases apart. Run must stop the command when ctx is done. String names the
// place for error messages, e.g. "local", "netns /run/netns/fpb-1a2b3c",
// "ssh fedora@10.0.2.2". Implementations must be safe for concurrent use:
// sessions run at the same time.
type Executor interface {
	Run(ctx context.Context, argv []string) (stdout, stderr []byte, err error)
	String() string
}

// waitDelay bounds how long Run waits for output pipes after the process was
// killed (exec.Cmd.WaitDelay).
const waitDelay = 5 * time.Second

// Local runs commands as child processes of this one.
type Local struct{}

var _ Executor = Local{}

// Run implements Executor.
func (Local) Run(ctx context.Context, argv []string) ([]byte, []byte, error) {
	if len(argv) == 0 {
		return nil, nil, fmt.Errorf("failed to run command: empty argv")
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = &stdout, &stderr, waitDelay
	err := cmd.Run()
	return stdout.Bytes(), stderr.Bytes(), err
}

func (Local) String() string { return "local" }

// NetNS runs commands inside the network namespace at Path (a bind mount
// such as /run/netns/NAME, or /proc/PID/ns/net): the child is forked from a
// thread switched into the namespace with containernetworking's ns.Do, so it
// needs no `ip` binary and no name under /run/netns. Needs CAP_SYS_ADMIN.
type NetNS struct {
	Path string
}

var _ Executor = NetNS{}

// Start starts cmd inside the namespace; the caller waits for it. Use it
// for long-running processes such as netserver.
func (n NetNS) Start(cmd *exec.Cmd) error {
	netns, err := ns.GetNS(n.Path)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %s: %w", n.Path, err)
	}
	defer netns.Close()
	// Start forks on the goroutine's locked OS thread, which ns.Do has
	// switched into the namespace; the child keeps it.
	return netns.Do(func(ns.NetNS) error { return cmd.Start() })
}

// Run implements Executor.
func (n NetNS) Run(ctx context.Context, argv []string) ([]byte, []byte, error) {
	if len(argv) == 0 {
		return nil, nil, fmt.Errorf("failed to run command in %s: empty argv", n.Path)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = &stdout, &stderr, waitDelay
	if err := n.Start(cmd); err != nil {
		return nil, nil, err
	}
	err := cmd.Wait()
	return stdout.Bytes(), stderr.Bytes(), err
}

func (n NetNS) String() string { return "netns " + n.Path }

// Prefix runs commands locally behind a fixed prefix such as
// `ip netns exec NAME`, `nsenter -t PID -n` or `ssh -l user -- host` (SSH). With
// Quote set the command is passed as one shell-quoted word, for prefixes
// (like ssh) whose far end hands it to a shell.
type Prefix struct {
	// Name is what String returns; empty means the prefix itself.
	Name string
	// Argv is the prefix, e.g. []string{"ip", "netns", "exec", "fpb-a"}.
	Argv []string
	// Quote passes the command as a single shell-quoted argument.
	Quote bool
}

var _ Executor = Prefix{}

// Run implements Executor.
func (p Prefix) Run(ctx context.Context, argv []string) ([]byte, []byte, error) {
	if len(p.Argv) == 0 {
		return nil, nil, fmt.Errorf("failed to run command via %s: empty prefix", p)
	}
	full := append([]string(nil), p.Argv...)
	if p.Quote {
		full = append(full, ShellJoin(argv))
	} else {
		full = append(full, argv...)
	}
	return Local{}.Run(ctx, full)
}

func (p Prefix) String() string {
	if p.Name != "" {
		return p.Name
	}
	return strings.Join(p.Argv, " ")
}

// IPNetNS runs commands with `ip netns exec name`, which also applies
// /etc/netns/NAME; prefer NetNS where no name exists.
func IPNetNS(name string) Prefix {
	return Prefix{Name: "netns " + name, Argv: []string{"ip", "netns", "exec", name}}
}

// SSH runs commands as user on host with the OpenSSH client in batch mode
// (no password prompts):
//
//	ssh -o BatchMode=yes <options> -l <user> -- <host> '<command>'
//
// options are the caller's own, e.g. "-i", "/keys/id_ed25519", "-o",
// "StrictHostKeyChecking=accept-new". The user is the argument of -l and the
// host comes after "--", which ends ssh's option parsing for the host and
// the command alike (OpenSSH ssh.c, opt_terminated), so neither can ever be
// read as an option such as -oProxyCommand=…, whatever its spelling; host is
// an IP address by type, so no name is resolved and no ssh:// URI or user@
// is parsed out of it. Callers still validate user (wellknown.ValidSSHUser):
// a bad user fails here with ssh's own error, never as an option.
func SSH(user string, host netip.Addr, options ...string) Prefix {
	argv := append([]string{"ssh", "-o", "BatchMode=yes"}, options...)
	argv = append(argv, "-l", user, "--", host.String())
	return Prefix{Name: "ssh " + SSHTarget(user, host), Argv: argv, Quote: true}
}

// SSHTarget returns "user@host" for messages, with an IPv6 host in brackets
// ("fedora@[fd00::2]").
func SSHTarget(user string, host netip.Addr) string {
	if host.Is6() && !host.Is4In6() {
		return user + "@[" + host.String() + "]"
	}
	return user + "@" + host.String()
}

// ShellJoin quotes each word of argv for a POSIX shell and joins them with
// spaces: words of only safe characters stay as they are, others are put in
// single quotes, where an embedded single quote becomes
//
//	'\''
func ShellJoin(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = shellQuote(w)
	}
	return strings.Join(words, " ")
}

func shellQuote(w string) string {
	if w == "" {
		return "''"
	}
	safe := true
	for _, r := range w {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:,=@%+^", r)) {
			safe = false
			break
		}
	}
	if safe {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

// Func adapts a function to Executor, e.g. for a Kubernetes exec stream or
// a test double.
type Func struct {
	Name string
	Fn   func(ctx context.Context, argv []string) (stdout, stderr []byte, err error)
}

var _ Executor = Func{}

// Run implements Executor.
func (f Func) Run(ctx context.Context, argv []string) ([]byte, []byte, error) {
	return f.Fn(ctx, argv)
}

func (f Func) String() string { return f.Name }

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/fastpath-io/fastpath/internal/platform/cliflags"
)

// command is one subcommand: run parses args (everything after the
// subcommand name) and does the work; stdout carries the result (JSON,
// ratio lines), stderr logs and errors.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// register adds a subcommand; call it from an init function.
func register(name, summary string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	if _, dup := commands[name]; dup {
		panic("fastpath-bench: subcommand " + name + " registered twice")
	}
	commands[name] = command{summary: summary, run: run}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the subcommand named by args[0] and returns the exit status:
// 0 on success, 1 when the command failed, 2 for a usage error.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fastpath-bench: unknown subcommand %q\n", args[0])
		usage(stderr)
		return 2
	}
	if err := cmd.run(ctx, args[1:], stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "fastpath-bench %s: %v\n", args[0], err)
			return 2
		}
		fmt.Fprintf(stderr, "fastpath-bench %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: fastpath-bench <subcommand> [flags]")
	fmt.Fprintln(w, "subcommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "run 'fastpath-bench <subcommand> -h' for its flags")
}

// usageError marks bad flags or arguments (exit status 2).
type usageError struct{ error }

// parseFlags parses args with fs, allowing flags after positional
// arguments ("report results.json -o dir"), and returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := cliflags.Parse(fs, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return nil, usageError{err}
	}
	return pos, err
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// newLogger logs key/value lines to w, or nothing when quiet.
func newLogger(w io.Writer, quiet bool) logr.Logger {
	if quiet {
		return logr.Discard()
	}
	return funcr.New(func(prefix, args string) { fmt.Fprintln(w, prefix, args) }, funcr.Options{})
}

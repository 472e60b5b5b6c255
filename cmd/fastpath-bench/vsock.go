package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fastpath-io/fastpath/internal/bench"
	"github.com/fastpath-io/fastpath/internal/bench/results"
	"github.com/fastpath-io/fastpath/internal/bench/vsockbench"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

func init() {
	register("vsock-server", "answer VSOCK_STREAM and VSOCK_RR clients on a vsock port until interrupted", vsockServerCmd)
	register("vsock-client", "run one VSOCK_STREAM or VSOCK_RR test against a vsock-server and print the session JSON", vsockClientCmd)
}

// transportFlags select the vsock transport: real AF_VSOCK, or the
// EMULATION over UNIX sockets (internal/vsock.UnixTransport) for machines
// without vhost-vsock and for tests.
type transportFlags struct {
	spec string
	cid  uint
}

const unixTransportPrefix = "unix:"

// Environment variables that set the defaults of --transport and --cid.
// The emulation's ssh (internal/localenv/emulation) sets them in every command it
// runs in an emulated guest, so a runner that copied itself into a guest
// (VM mode) uses that guest's emulated vsock there and real AF_VSOCK in a
// real guest.
const (
	vsockTransportEnv = "FASTPATH_VSOCK_TRANSPORT"
	vsockCIDEnv       = "FASTPATH_VSOCK_CID"
)

func (t *transportFlags) register(fs *flag.FlagSet, what string) {
	spec := "vsock"
	if v := os.Getenv(vsockTransportEnv); v != "" {
		spec = v
	}
	var cid uint64
	if v := os.Getenv(vsockCIDEnv); v != "" {
		cid, _ = strconv.ParseUint(v, 10, 32) // validate rejects a bad value as a missing --cid
	}
	fs.StringVar(&t.spec, "transport", spec, what+": vsock (real AF_VSOCK sockets) or unix:<dir> (an EMULATION of vsock over UNIX sockets under <dir>, one directory per CID); default $"+vsockTransportEnv+", else vsock")
	fs.UintVar(&t.cid, "cid", uint(cid), "with --transport unix:<dir>: the emulated context ID of this end (real AF_VSOCK takes it from the kernel); default $"+vsockCIDEnv)
}

func (t transportFlags) unixDir() (string, bool) {
	return strings.CutPrefix(t.spec, unixTransportPrefix)
}

func (t transportFlags) validate() error {
	dir, emulated := t.unixDir()
	switch {
	case emulated && dir == "":
		return fmt.Errorf("failed to parse --transport %q: unix: needs a directory", t.spec)
	case emulated && (t.cid == 0 || t.cid >= uint(vsock.AnyCID)):
		return fmt.Errorf("--transport %s needs --cid, this end's emulated context ID (1-%d)", t.spec, vsock.AnyCID-1)
	case !emulated && t.spec != "vsock":
		return fmt.Errorf("failed to parse --transport %q: want vsock or unix:<dir>", t.spec)
	case !emulated && t.cid != 0:
		return fmt.Errorf("--cid applies to --transport unix:<dir> only: AF_VSOCK takes the context ID from the kernel")
	}
	return nil
}

// transport returns the selected transport; call validate first. Nothing
// is opened here: AF_VSOCK sockets are only made by Listen and Dial.
func (t transportFlags) transport() vsock.Transport {
	if dir, ok := t.unixDir(); ok {
		return vsock.NewUnixTransport(dir, uint32(t.cid))
	}
	return vsock.AFVSockTransport{}
}

// emulationNote says what is emulated, for machine.emulated; "" for real AF_VSOCK.
func (t transportFlags) emulationNote() string {
	if dir, ok := t.unixDir(); ok {
		return fmt.Sprintf("vsock emulated over UNIX sockets under %s (this end is CID %d)", dir, t.cid)
	}
	return ""
}

func vsockServerCmd(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("vsock-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var tf transportFlags
	tf.register(fs, "the vsock transport to listen on")
	port := fs.Uint("port", 0, "vsock port to listen on (1-4294967294)")
	quiet := fs.Bool("quiet", false, "do not log to stderr")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", pos)}
	}
	if err := tf.validate(); err != nil {
		return usageError{err}
	}
	if *port == 0 || *port >= uint(vsock.AnyCID) {
		return usageError{fmt.Errorf("--port %d must be 1-%d", *port, vsock.AnyCID-1)}
	}
	ln, err := tf.transport().Listen(uint32(*port))
	if err != nil {
		return err
	}
	log := newLogger(stderr, *quiet)
	kv := []any{"address", ln.Addr().String(), "tests", vsockbench.TestStream + "," + vsockbench.TestRR}
	if note := tf.emulationNote(); note != "" {
		kv = append(kv, "emulation", note)
	}
	log.Info("Serving", kv...)
	return vsockbench.Serve(ctx, ln, log)
}

func vsockClientCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("vsock-client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var tf transportFlags
	tf.register(fs, "the vsock transport to dial over")
	server := fs.String("server", "", "the server, cid:port (through the node's sibling relay: 2:<relay port>)")
	test := fs.String("test", results.VSockStream, "VSOCK_STREAM or VSOCK_RR")
	message := fs.String("message-size", "64K", "VSOCK_STREAM: bytes per write (VSOCK_RR always sends 1 byte)")
	duration := fs.Duration("duration", 10*time.Second, "length of the test")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", pos)}
	}
	if err := tf.validate(); err != nil {
		return usageError{err}
	}
	cid, port, ok := strings.Cut(*server, ":")
	if _, err := strconv.ParseUint(cid, 10, 32); !ok || err != nil {
		return usageError{fmt.Errorf("failed to parse --server %q: want cid:port", *server)}
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil || p == 0 {
		return usageError{fmt.Errorf("failed to parse --server %q: want cid:port with a port of 1-%d", *server, vsock.AnyCID-1)}
	}
	if *test != results.VSockStream && *test != results.VSockRR {
		return usageError{fmt.Errorf("--test %q: want %s or %s", *test, results.VSockStream, results.VSockRR)}
	}
	if *duration <= 0 {
		return usageError{fmt.Errorf("--duration %s must be positive", *duration)}
	}
	msg := 1
	if *test == results.VSockStream {
		sizes, err := bench.ParseSizes(*message)
		if err != nil || len(sizes) != 1 || sizes[0] < 1 {
			return usageError{fmt.Errorf("failed to parse --message-size %q: want one positive size", *message)}
		}
		msg = sizes[0]
	}
	pt := results.Point{Test: *test, MessageBytes: msg, Sessions: 1, Pairs: 1}
	s, err := bench.VSock{Transport: tf.transport()}.RunSession(ctx, bench.Endpoint{Host: cid, Port: int(p)}, pt, *duration)
	if err != nil {
		return err
	}
	s.Pair, s.Session = 1, 1
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(bench.VSockClientOutput{Test: *test, MessageBytes: msg, Emulated: tf.emulationNote(), Session: s}); err != nil {
		return fmt.Errorf("failed to encode the session: %w", err)
	}
	return nil
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/vsockbench"
	"github.com/fastpath-io/fastpath/internal/vsock"
)

// VSockServerOptions are the flags of `fastpath-bench vsock-server`, which
// answers VSOCK_STREAM and VSOCK_RR clients (vsockbench.Serve).
type VSockServerOptions struct {
	Transport TransportOptions
	// Port is the vsock port to listen on, 1 to vsock.AnyCID-1.
	Port uint
}

// AddFlags registers --transport, --cid and --port on fs.
func (o *VSockServerOptions) AddFlags(fs *pflag.FlagSet) {
	o.Transport.AddFlags(fs, "the vsock transport to listen on")
	fs.UintVar(&o.Port, "port", 0, "vsock port to listen on (1-4294967294)")
}

// Validate checks the transport and the port; errors name the flag.
func (o VSockServerOptions) Validate() error {
	if err := o.Transport.Validate(); err != nil {
		return err
	}
	if o.Port == 0 || o.Port >= uint(vsock.AnyCID) {
		return fmt.Errorf("--port %d must be 1-%d", o.Port, vsock.AnyCID-1)
	}
	return nil
}

// Serve listens and answers clients until ctx ends. It logs "Serving" once
// it listens (the runner waits for that line in a guest).
func (o VSockServerOptions) Serve(ctx context.Context, log logr.Logger) error {
	ln, err := o.Transport.Transport().Listen(uint32(o.Port))
	if err != nil {
		return err
	}
	kv := []any{"address", ln.Addr().String(), "tests", vsockbench.TestStream + "," + vsockbench.TestRR}
	if note := o.Transport.EmulationNote(); note != "" {
		kv = append(kv, "emulation", note)
	}
	log.Info("Serving", kv...)
	return vsockbench.Serve(ctx, ln, log)
}

// VSockClientOptions are the flags of `fastpath-bench vsock-client`, which
// runs one VSOCK_STREAM or VSOCK_RR session and prints it as
// VSockClientOutput JSON (what GuestVSock reads).
type VSockClientOptions struct {
	Transport TransportOptions
	// Server is cid:port.
	Server string
	// Test is VSOCK_STREAM or VSOCK_RR.
	Test string
	// MessageSize is VSOCK_STREAM's bytes per write (a ParseSizes value).
	MessageSize string
	Duration    time.Duration

	cid     string
	port    int
	message int
}

// AddFlags registers the client's flags on fs.
func (o *VSockClientOptions) AddFlags(fs *pflag.FlagSet) {
	o.Transport.AddFlags(fs, "the vsock transport to dial over")
	fs.StringVar(&o.Server, "server", "", "the server, cid:port (through the node's sibling relay: 2:<relay port>)")
	fs.StringVar(&o.Test, "test", results.VSockStream, "VSOCK_STREAM or VSOCK_RR")
	fs.StringVar(&o.MessageSize, "message-size", "64K", "VSOCK_STREAM: bytes per write (VSOCK_RR always sends 1 byte)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "length of the test")
}

// Validate checks the flags and resolves the server and message size;
// errors name the flag and the allowed values.
func (o *VSockClientOptions) Validate() error {
	if err := o.Transport.Validate(); err != nil {
		return err
	}
	cid, port, ok := strings.Cut(o.Server, ":")
	if _, err := strconv.ParseUint(cid, 10, 32); !ok || err != nil {
		return fmt.Errorf("failed to parse --server %q: want cid:port", o.Server)
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil || p == 0 {
		return fmt.Errorf("failed to parse --server %q: want cid:port with a port of 1-%d", o.Server, vsock.AnyCID-1)
	}
	if o.Test != results.VSockStream && o.Test != results.VSockRR {
		return fmt.Errorf("--test %q: want %s or %s", o.Test, results.VSockStream, results.VSockRR)
	}
	if o.Duration <= 0 {
		return fmt.Errorf("--duration %s must be positive", o.Duration)
	}
	o.cid, o.port, o.message = cid, int(p), 1
	if o.Test == results.VSockStream {
		sizes, err := ParseSizes(o.MessageSize)
		if err != nil || len(sizes) != 1 || sizes[0] < 1 {
			return fmt.Errorf("failed to parse --message-size %q: want one positive size", o.MessageSize)
		}
		o.message = sizes[0]
	}
	return nil
}

// Run measures one session (call Validate first) and writes it to w as
// indented VSockClientOutput JSON.
func (o VSockClientOptions) Run(ctx context.Context, w io.Writer) error {
	pt := results.Point{Test: o.Test, MessageBytes: o.message, Sessions: 1, Pairs: 1}
	s, err := VSock{Transport: o.Transport.Transport()}.RunSession(ctx, Endpoint{Host: o.cid, Port: o.port}, pt, o.Duration)
	if err != nil {
		return err
	}
	s.Pair, s.Session = 1, 1
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(VSockClientOutput{Test: o.Test, MessageBytes: o.message, Emulated: o.Transport.EmulationNote(), Session: s}); err != nil {
		return fmt.Errorf("failed to encode the session: %w", err)
	}
	return nil
}

package netperf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// NetserverOptions says where to start a netserver.
type NetserverOptions struct {
	// Binary is the netserver program; empty means "netserver" from PATH.
	Binary string
	// Addr is the address to listen on (netserver -L), e.g. "10.250.0.3".
	Addr string
	// Port is the control port (netserver -p); 0 picks a free one.
	Port int
	// NetNS is the path of the network namespace to run in; empty means the
	// caller's.
	NetNS string
	// ReadyTimeout bounds the wait until the control port accepts
	// connections; 0 means 5 s.
	ReadyTimeout time.Duration
}

// Netserver is a running `netserver -D` (in the foreground, so it dies with
// Stop; it still forks one child per test, which exits when the test ends).
type Netserver struct {
	// Addr and Port are where it listens; Endpoint() joins them.
	Addr string
	Port int
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

// Endpoint returns "addr:port".
func (n *Netserver) Endpoint() string { return net.JoinHostPort(n.Addr, strconv.Itoa(n.Port)) }

// Pid is the netserver's process ID; its test processes are its children.
func (n *Netserver) Pid() int { return n.cmd.Process.Pid }

// Output returns what netserver printed so far (stdout and stderr).
func (n *Netserver) Output() string { return n.out.String() }

// Stop kills the netserver and waits for it to exit. It is safe to call
// more than once.
func (n *Netserver) Stop() error {
	select {
	case <-n.done:
		return nil
	default:
	}
	if err := n.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("failed to kill netserver %s (pid %d): %w", n.Endpoint(), n.cmd.Process.Pid, err)
	}
	<-n.done
	return nil
}

// StartNetserver starts a netserver as described by opts and waits until its
// control port accepts connections. A free port is chosen (and the start
// retried) when opts.Port is 0. The caller must Stop it.
func StartNetserver(ctx context.Context, opts NetserverOptions) (*Netserver, error) {
	if opts.Addr == "" {
		return nil, fmt.Errorf("failed to start netserver: listen address is empty")
	}
	attempts := 1
	if opts.Port == 0 {
		attempts = 3
	}
	var err error
	for range attempts {
		var n *Netserver
		n, err = startNetserver(ctx, opts)
		if err == nil {
			return n, nil
		}
	}
	return nil, err
}

func startNetserver(ctx context.Context, opts NetserverOptions) (*Netserver, error) {
	// Bind first: a port that is already served would pass the readiness
	// check below while our netserver exits with "Unable to start netserver".
	port := opts.Port
	if err := inNetNS(opts.NetNS, func() error {
		var err error
		port, err = freePort(opts.Addr, port)
		return err
	}); err != nil {
		return nil, err
	}
	bin := opts.Binary
	if bin == "" {
		bin = "netserver"
	}
	n := &Netserver{Addr: opts.Addr, Port: port, out: &lockedBuffer{}, done: make(chan struct{})}
	n.cmd = exec.Command(bin, "-D", "-L", opts.Addr, "-p", strconv.Itoa(port))
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	start := n.cmd.Start
	if opts.NetNS != "" {
		start = func() error { return NetNS{Path: opts.NetNS}.Start(n.cmd) }
	}
	if err := start(); err != nil {
		return nil, fmt.Errorf("failed to start netserver on %s: %w", n.Endpoint(), err)
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.done)
	}()
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	deadline := time.Now().Add(timeout)
	for {
		err := inNetNS(opts.NetNS, func() error {
			c, err := net.DialTimeout("tcp", n.Endpoint(), time.Second)
			if err == nil {
				c.Close()
			}
			return err
		})
		if err == nil {
			return n, nil
		}
		select {
		case <-n.done:
			return nil, fmt.Errorf("failed to start netserver on %s: it exited (%v): %s", n.Endpoint(), n.err, strings.TrimSpace(n.Output()))
		case <-ctx.Done():
			_ = n.Stop()
			return nil, fmt.Errorf("failed to start netserver on %s: %w", n.Endpoint(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = n.Stop()
			return nil, fmt.Errorf("failed to start netserver on %s: control port not accepting connections after %s: %v", n.Endpoint(), timeout, err)
		}
	}
}

// inNetNS runs fn in the network namespace at path, or here when path is "".
func inNetNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	netns, err := ns.GetNS(path)
	if err != nil {
		return fmt.Errorf("failed to open network namespace %s: %w", path, err)
	}
	defer netns.Close()
	return netns.Do(func(ns.NetNS) error { return fn() })
}

// freePort checks that TCP port on addr is free (or, for port 0, finds one)
// and returns it; it may be taken again by the time netserver binds it.
func freePort(addr string, port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("failed to start netserver: port %d on %s is not free: %w", port, addr, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer is a bytes.Buffer safe for the writer goroutines of exec.Cmd
// and concurrent readers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

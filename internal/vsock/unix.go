package vsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// UnixTransport EMULATES AF_VSOCK with UNIX stream sockets, for tests and the
// demo; nothing in it touches /dev/vsock.
//
// Layout: every CID is a directory under Root and every listening port a
// socket in it, <Root>/<cid>/<port>.sock, like the per-VM socket files of
// Firecracker's hybrid vsock. A UnixTransport is constructed for one CID (the
// emulated machine it belongs to); Listen creates sockets in that CID's
// directory and Dial connects to sockets in the target CID's directory.
//
// Connection preamble (text, one line each way, before any payload):
//
//	dialer   -> listener: "CONNECT <src-cid> <src-port>\n"
//	listener -> dialer:   "OK\n"            (or "ERR <reason>\n", then close)
//
// <src-cid> is the dialer's CID and <src-port> an emulated ephemeral port,
// both decimal uint32. The listener reports them as the accepted connection's
// RemoteAddr, which is how the sibling relay learns the peer CID (real
// AF_VSOCK gets it from the kernel). The dialer sends nothing after the
// CONNECT line until it has read "OK\n", so neither side reads past the
// preamble. Firecracker's host-initiated hybrid vsock uses a similar
// "CONNECT <port>\n" / "OK <port>\n" exchange.
//
// Real guests: a UnixTransport of the host CID also speaks hybrid vsock, the
// host side of vhost-device-vsock (see hybrid.go), so the node agent's relay
// over this transport serves real QEMU guests whose backends put their
// --uds-path at <Root>/<cid>.vsock, next to the emulated ones.
//
// The emulation trusts the preamble: any process that can reach Root can
// claim any CID. That is acceptable for tests and the demo only.
type UnixTransport struct {
	// Root is the directory holding one directory per CID.
	Root string
	// CID is the context ID of the emulated machine this transport belongs to.
	CID uint32
	// HandshakeTimeout bounds the preamble exchange on both sides; zero
	// means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration

	nextPort atomic.Uint32
}

// DefaultHandshakeTimeout bounds the UnixTransport preamble exchange when
// UnixTransport.HandshakeTimeout is zero.
const DefaultHandshakeTimeout = 5 * time.Second

// firstEphemeralPort is the first emulated source port handed out by a
// UnixTransport's Dial; Linux vsock likewise allocates ephemeral ports above
// the reserved range 0-1023 (LAST_RESERVED_PORT in net/vmw_vsock/af_vsock.c).
const firstEphemeralPort = 1024

// maxPreambleLen is the longest preamble line accepted: "CONNECT " plus two
// 10-digit numbers, a space and a newline fit well within it.
const maxPreambleLen = 64

// NewUnixTransport returns the emulated transport of the machine with context
// ID cid, whose sockets live under root (created on first Listen).
func NewUnixTransport(root string, cid uint32) *UnixTransport {
	return &UnixTransport{Root: root, CID: cid}
}

var (
	_ Transport = (*UnixTransport)(nil)
	_ Emulation = (*UnixTransport)(nil)
)

// EmulationNote says the transport is the UNIX-socket emulation, where its
// sockets are and which CID this end is.
func (t *UnixTransport) EmulationNote() string {
	return fmt.Sprintf("vsock emulated over UNIX sockets under %s (this end is CID %d)", t.Root, t.CID)
}

// SocketPath returns the socket file of (cid, port): <Root>/<cid>/<port>.sock.
func (t *UnixTransport) SocketPath(cid, port uint32) string {
	return filepath.Join(t.Root, strconv.FormatUint(uint64(cid), 10), strconv.FormatUint(uint64(port), 10)+".sock")
}

func (t *UnixTransport) handshakeTimeout() time.Duration {
	if t.HandshakeTimeout > 0 {
		return t.HandshakeTimeout
	}
	return DefaultHandshakeTimeout
}

// Listen creates <Root>/<CID>/<port>.sock and returns a listener whose
// Accept yields connections that have completed the preamble, with
// RemoteAddr the dialer's *Addr. port 0 is rejected (no automatic port
// assignment in the emulation). A socket file left behind by a dead process
// is replaced; one with a live listener yields an error wrapping
// syscall.EADDRINUSE.
func (t *UnixTransport) Listen(port uint32) (net.Listener, error) {
	if port == 0 {
		return nil, fmt.Errorf("failed to listen on emulated vsock %d:%d: port 0 (automatic assignment) is not supported", t.CID, port)
	}
	path := t.SocketPath(t.CID, port)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create emulated vsock CID directory %s: %w", filepath.Dir(path), err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && staleSocket(path) {
		if rmErr := os.Remove(path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return nil, fmt.Errorf("failed to remove stale emulated vsock socket %s: %w", path, rmErr)
		}
		ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	}
	if err != nil {
		return nil, fmt.Errorf("failed to listen on emulated vsock %d:%d at %s: %w", t.CID, port, path, err)
	}
	l := &unixListener{
		ln:      ln,
		addr:    &Addr{CID: t.CID, Port: port},
		timeout: t.handshakeTimeout(),
		ready:   make(chan net.Conn),
		done:    make(chan struct{}),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	if t.CID == HostCID {
		l.hybrid = startHybridListener(t.Root, port, l.ready, l.done)
	}
	return l, nil
}

// staleSocket reports whether the socket file at path has no listener behind
// it (connecting is refused), so it may be replaced.
func staleSocket(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// Dial connects to (cid, port) by connecting to <Root>/<cid>/<port>.sock and
// exchanging the preamble; from the host CID to a real guest (a socket at
// HybridPath(cid)) it speaks hybrid vsock instead. The returned connection reports LocalAddr
// (t.CID, ephemeral port) and RemoteAddr (cid, port) as *Addr and supports
// CloseWrite. A missing listener yields an error wrapping os.ErrNotExist
// (no socket file) or syscall.ECONNREFUSED (stale file); a listener that
// answers "ERR" yields an error naming its reason.
func (t *UnixTransport) Dial(ctx context.Context, cid, port uint32) (net.Conn, error) {
	if t.CID == HostCID {
		if fi, err := os.Stat(t.HybridPath(cid)); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return t.dialHybrid(ctx, cid, port)
		}
	}
	path := t.SocketPath(cid, port)
	var d net.Dialer
	raw, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("failed to dial emulated vsock %d:%d at %s: %w", cid, port, path, err)
	}
	uc := raw.(*net.UnixConn)
	srcPort := firstEphemeralPort + t.nextPort.Add(1) - 1
	if err := t.dialHandshake(ctx, uc, srcPort); err != nil {
		_ = uc.Close()
		return nil, fmt.Errorf("failed to dial emulated vsock %d:%d at %s: %w", cid, port, path, err)
	}
	return &unixConn{
		UnixConn: uc,
		local:    &Addr{CID: t.CID, Port: srcPort},
		remote:   &Addr{CID: cid, Port: port},
	}, nil
}

func (t *UnixTransport) dialHandshake(ctx context.Context, uc *net.UnixConn, srcPort uint32) error {
	deadline := time.Now().Add(t.handshakeTimeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := uc.SetDeadline(deadline); err != nil {
		return fmt.Errorf("failed to set preamble deadline: %w", err)
	}
	// Unblock the exchange at once when ctx is cancelled.
	stop := context.AfterFunc(ctx, func() { _ = uc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := fmt.Fprintf(uc, "CONNECT %d %d\n", t.CID, srcPort); err != nil {
		return fmt.Errorf("failed to send preamble: %w", errors.Join(ctx.Err(), err))
	}
	line, err := readLine(uc, maxPreambleLen)
	if err != nil {
		return fmt.Errorf("failed to read preamble reply: %w", errors.Join(ctx.Err(), err))
	}
	if line != "OK" {
		return fmt.Errorf("listener refused the connection: %q", line)
	}
	if !stop() {
		return fmt.Errorf("failed to complete preamble: %w", ctx.Err())
	}
	if err := uc.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("failed to clear preamble deadline: %w", err)
	}
	return nil
}

// readLine reads one '\n'-terminated line byte by byte, so that nothing after
// the newline is consumed, and returns it without the newline.
func readLine(c net.Conn, max int) (string, error) {
	var b strings.Builder
	var one [1]byte
	for b.Len() <= max {
		if _, err := c.Read(one[:]); err != nil {
			return "", err
		}
		if one[0] == '\n' {
			return b.String(), nil
		}
		b.WriteByte(one[0])
	}
	return "", fmt.Errorf("preamble line longer than %d bytes", max)
}

// parseConnect parses "CONNECT <src-cid> <src-port>".
func parseConnect(line string) (Addr, error) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "CONNECT" {
		return Addr{}, fmt.Errorf("malformed preamble %q, want \"CONNECT <src-cid> <src-port>\"", line)
	}
	cid, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return Addr{}, fmt.Errorf("malformed source CID %q: %w", f[1], err)
	}
	port, err := strconv.ParseUint(f[2], 10, 32)
	if err != nil {
		return Addr{}, fmt.Errorf("malformed source port %q: %w", f[2], err)
	}
	return Addr{CID: uint32(cid), Port: uint32(port)}, nil
}

// unixListener accepts raw UNIX connections in the background, runs the
// preamble for each in its own goroutine (so one slow dialer cannot stall
// others) and hands completed connections to Accept.
type unixListener struct {
	ln      *net.UnixListener
	addr    *Addr
	timeout time.Duration
	ready   chan net.Conn
	done    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	// hybrid accepts real guests' connections (host CID only).
	hybrid *hybridListener
}

func (l *unixListener) acceptLoop() {
	defer l.wg.Done()
	for {
		uc, err := l.ln.AcceptUnix()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Transient (e.g. EMFILE): back off briefly, as net/http does.
			select {
			case <-l.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		l.wg.Add(1)
		go l.handshake(uc)
	}
}

func (l *unixListener) handshake(uc *net.UnixConn) {
	defer l.wg.Done()
	_ = uc.SetDeadline(time.Now().Add(l.timeout))
	line, err := readLine(uc, maxPreambleLen)
	if err != nil {
		_ = uc.Close()
		return
	}
	src, err := parseConnect(line)
	if err != nil {
		_, _ = fmt.Fprintf(uc, "ERR %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		_ = uc.Close()
		return
	}
	if _, err := uc.Write([]byte("OK\n")); err != nil {
		_ = uc.Close()
		return
	}
	if err := uc.SetDeadline(time.Time{}); err != nil {
		_ = uc.Close()
		return
	}
	c := &unixConn{UnixConn: uc, local: l.addr, remote: &src}
	select {
	case l.ready <- c:
	case <-l.done:
		_ = uc.Close()
	}
}

// Accept returns the next connection that completed the preamble. After
// Close it returns an error wrapping net.ErrClosed.
func (l *unixListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: Network, Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops listening, removes the socket file, closes connections still in
// the preamble and waits for the background goroutines.
func (l *unixListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.ln.Close()
		if l.hybrid != nil {
			l.hybrid.close()
		}
		l.wg.Wait()
	})
	if err != nil {
		return fmt.Errorf("failed to close emulated vsock listener %s: %w", l.addr, err)
	}
	return nil
}

// Addr returns the listener's *Addr (this transport's CID and the port).
func (l *unixListener) Addr() net.Addr { return l.addr }

// unixConn is a UNIX stream connection that reports vsock addresses. It
// embeds *net.UnixConn, so CloseWrite and CloseRead (shutdown(2)) are
// available.
type unixConn struct {
	*net.UnixConn
	local, remote *Addr
}

func (c *unixConn) LocalAddr() net.Addr  { return c.local }
func (c *unixConn) RemoteAddr() net.Addr { return c.remote }

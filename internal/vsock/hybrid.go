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
	"syscall"
	"time"
)

// Hybrid vsock: the host side of a vhost-user vsock backend
// (vhost-device-vsock --uds-path, Firecracker's hybrid vsock). A real guest
// with context ID <cid> whose backend's --uds-path is <Root>/<cid>.vsock is
// served by the same UnixTransport as the emulated guests:
//
//   - host -> guest: the host connects to <Root>/<cid>.vsock and writes
//     "CONNECT <port>\n"; the backend answers "OK <host-port>\n" once the
//     guest accepted (or closes the stream when nothing listens); then the
//     stream carries the payload. Nothing may be sent before the OK line.
//   - guest -> host: a guest dialing CID 2 port P makes the backend connect to
//     <Root>/<cid>.vsock_P, with no preamble: the path is the guest's
//     identity (only that guest's backend connects there).
//
// A UnixTransport of the host CID therefore listens on <Root>/<cid>.vsock_P
// for every real guest socket present (rescanned every HybridRescanInterval)
// besides its emulated socket, and dials a CID over the hybrid protocol when
// <Root>/<cid>.vsock exists.

// HybridSuffix ends the name of a real guest's hybrid vsock socket.
const HybridSuffix = ".vsock"

// HybridRescanInterval is how often a host listener looks for real guests
// that appeared or went away.
const HybridRescanInterval = 100 * time.Millisecond

// HybridPath returns the hybrid vsock socket of the real guest cid:
// <Root>/<cid>.vsock, the --uds-path to give its vhost-device-vsock.
func (t *UnixTransport) HybridPath(cid uint32) string {
	return filepath.Join(t.Root, strconv.FormatUint(uint64(cid), 10)+HybridSuffix)
}

// hybridGuests lists the CIDs with a hybrid socket under root.
func hybridGuests(root string) map[uint32]bool {
	out := map[uint32]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		return out
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), HybridSuffix)
		if !ok || e.Type()&os.ModeSocket == 0 {
			continue
		}
		cid, err := strconv.ParseUint(name, 10, 32)
		if err != nil || uint32(cid) < MinGuestCID || uint32(cid) == AnyCID {
			continue
		}
		out[uint32(cid)] = true
	}
	return out
}

// dialHybrid connects to port of the real guest cid through its backend.
func (t *UnixTransport) dialHybrid(ctx context.Context, cid, port uint32) (net.Conn, error) {
	path := t.HybridPath(cid)
	var d net.Dialer
	raw, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("failed to dial hybrid vsock %d:%d at %s: %w", cid, port, path, err)
	}
	uc := raw.(*net.UnixConn)
	deadline := time.Now().Add(t.handshakeTimeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	fail := func(err error) (net.Conn, error) {
		_ = uc.Close()
		return nil, fmt.Errorf("failed to dial hybrid vsock %d:%d at %s: %w", cid, port, path, errors.Join(ctx.Err(), err))
	}
	if err := uc.SetDeadline(deadline); err != nil {
		return fail(err)
	}
	stop := context.AfterFunc(ctx, func() { _ = uc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := fmt.Fprintf(uc, "CONNECT %d\n", port); err != nil {
		return fail(err)
	}
	line, err := readLine(uc, maxPreambleLen)
	if err != nil {
		return fail(fmt.Errorf("no \"OK <port>\" reply (nothing listens on port %d in the guest?): %w", port, err))
	}
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "OK" {
		return fail(fmt.Errorf("backend refused the connection: %q", line))
	}
	local, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil {
		return fail(fmt.Errorf("malformed reply %q: %w", line, err))
	}
	if !stop() {
		return fail(errors.New("cancelled"))
	}
	if err := uc.SetDeadline(time.Time{}); err != nil {
		return fail(err)
	}
	return &unixConn{UnixConn: uc, local: &Addr{CID: HostCID, Port: uint32(local)}, remote: &Addr{CID: cid, Port: port}}, nil
}

// hybridListener accepts guest-initiated connections to one host port from
// every real guest: one UNIX listener per guest at <Root>/<cid>.vsock_<port>,
// added and removed as guests come and go. It hands connections to the
// emulated listener's Accept, reporting the guest's CID from the path (the
// backend does not say the guest's source port; it is reported as 0).
type hybridListener struct {
	root  string
	port  uint32
	ready chan<- net.Conn
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	lns   map[uint32]*net.UnixListener
}

func startHybridListener(root string, port uint32, ready chan<- net.Conn, done chan struct{}) *hybridListener {
	h := &hybridListener{root: root, port: port, ready: ready, done: done, lns: map[uint32]*net.UnixListener{}}
	h.rescan()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		tick := time.NewTicker(HybridRescanInterval)
		defer tick.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-tick.C:
				h.rescan()
			}
		}
	}()
	return h
}

func (h *hybridListener) path(cid uint32) string {
	return filepath.Join(h.root, strconv.FormatUint(uint64(cid), 10)+HybridSuffix+"_"+strconv.FormatUint(uint64(h.port), 10))
}

// rescan listens for new guests and stops listening for vanished ones.
func (h *hybridListener) rescan() {
	guests := hybridGuests(h.root)
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.done:
		return
	default:
	}
	for cid, ln := range h.lns {
		if !guests[cid] {
			_ = ln.Close() // removes the socket file
			delete(h.lns, cid)
		}
	}
	for cid := range guests {
		if h.lns[cid] != nil {
			continue
		}
		path := h.path(cid)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil && errors.Is(err, syscall.EADDRINUSE) && staleSocket(path) {
			_ = os.Remove(path)
			ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		}
		if err != nil {
			continue // retried on the next rescan
		}
		h.lns[cid] = ln
		h.wg.Add(1)
		go h.accept(cid, ln)
	}
}

func (h *hybridListener) accept(cid uint32, ln *net.UnixListener) {
	defer h.wg.Done()
	local := &Addr{CID: HostCID, Port: h.port}
	for {
		uc, err := ln.AcceptUnix()
		if err != nil {
			return // closed by rescan or close
		}
		c := &unixConn{UnixConn: uc, local: local, remote: &Addr{CID: cid}}
		select {
		case h.ready <- c:
		case <-h.done:
			_ = uc.Close()
			return
		}
	}
}

// close stops every per-guest listener (removing its socket file) and
// waits for the goroutines; done must be closed first.
func (h *hybridListener) close() {
	h.mu.Lock()
	for cid, ln := range h.lns {
		_ = ln.Close()
		delete(h.lns, cid)
	}
	h.mu.Unlock()
	h.wg.Wait()
}

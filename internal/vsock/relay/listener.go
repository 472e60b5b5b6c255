package relay

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// listener serves one route: it accepts on the route's port, admits or
// denies each connection and runs a pipe per admitted connection.
type listener struct {
	relay      *Relay
	key        routeKey
	ln         net.Listener
	cfg        atomic.Pointer[config] // swapped by Update, read per accept
	ctx        context.Context        // cancelled by stop; bounds target dials
	cancel     context.CancelFunc
	acceptDone chan struct{}
	m          routeMetrics
	log        logr.Logger

	mu     sync.Mutex
	conns  map[*pipe]struct{}
	active int
	wg     sync.WaitGroup // one per admitted connection
}

func (l *listener) acceptLoop() {
	defer close(l.acceptDone)
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil || isClosed(err) {
				return
			}
			l.log.Error(err, "Failed to accept vsock relay connection")
			select {
			case <-l.ctx.Done():
				return
			case <-time.After(acceptBackoff):
			}
			continue
		}
		l.admit(c)
	}
}

// admit applies the route's allow-list and connection limit to c and starts
// its pipe. Denied connections are closed at once, counted and logged.
func (l *listener) admit(c net.Conn) {
	cfg := l.cfg.Load()
	cid, err := vsock.PeerCID(c)
	if err != nil {
		l.deny(c, ReasonUnknownPeer, cfg, "sourceAddr", c.RemoteAddr().String(), "err", err.Error())
		return
	}
	if _, ok := cfg.allowed[cid]; !ok {
		l.deny(c, ReasonCIDNotAllowed, cfg, "sourceCID", cid)
		return
	}
	l.mu.Lock()
	if l.active >= cfg.maxConns {
		l.mu.Unlock()
		l.deny(c, ReasonConnectionLimit, cfg, "sourceCID", cid, "maxConns", cfg.maxConns)
		return
	}
	if reason := l.relay.reserve(cid, l.key.attachment.Namespace); reason != "" {
		l.mu.Unlock()
		l.deny(c, reason, cfg, "sourceCID", cid, "maxTotalConns", l.relay.opts.MaxTotalConns,
			"maxConnsPerNamespace", l.relay.opts.MaxConnsPerNamespace, "maxConnsPerCID", l.relay.opts.MaxConnsPerCID)
		return
	}
	p := &pipe{l: l, src: c, srcCID: cid, targetCID: cfg.route.TargetCID, targetPort: cfg.route.TargetPort}
	l.conns[p] = struct{}{}
	l.active++
	l.wg.Add(1)
	l.mu.Unlock()
	l.m.active.Inc()
	go l.serve(p, cfg)
}

// deny counts and logs a refused connection, then closes it (in that order,
// so the count is visible by the time the guest sees the close). The log
// line is rate-limited relay-wide (Relay.logDenial); the count is not.
func (l *listener) deny(c net.Conn, reason string, cfg *config, kv ...any) {
	l.m.denials.WithLabelValues(reason).Inc()
	l.relay.logDenial(l.log, nil, append([]any{"reason", reason, "route", cfg.route.String()}, kv...))
	_ = c.Close()
}

// serve dials the target of cfg and copies until both directions end.
func (l *listener) serve(p *pipe, cfg *config) {
	defer func() {
		p.close()
		l.uncount(p)
		l.relay.release(p.srcCID, l.key.attachment.Namespace)
		l.wg.Done()
	}()
	ctx, cancel := context.WithTimeout(l.ctx, l.relay.opts.DialTimeout)
	dst, err := l.relay.opts.Transport.Dial(ctx, cfg.route.TargetCID, cfg.route.TargetPort)
	cancel()
	if err != nil {
		if l.ctx.Err() == nil {
			l.m.denials.WithLabelValues(ReasonTargetUnreachable).Inc()
			l.relay.logDenial(l.log, err, []any{"reason", ReasonTargetUnreachable, "route", cfg.route.String(),
				"sourceCID", p.srcCID, "targetCID", cfg.route.TargetCID, "targetPort", cfg.route.TargetPort})
		}
		return
	}
	if !p.setDst(dst) {
		return // stopped while dialing
	}
	l.m.total.Inc()
	p.run(l.relay.opts.IdleTimeout, l.relay.opts.HalfCloseTimeout)
}

// uncount removes p from the listener's open connections and the active
// gauge; only the first call for a pipe has an effect.
func (l *listener) uncount(p *pipe) {
	l.mu.Lock()
	_, open := l.conns[p]
	delete(l.conns, p)
	if open {
		l.active--
	}
	l.mu.Unlock()
	if open {
		l.m.active.Dec()
	}
}

// revoke closes the established connections cfg no longer admits: a source
// CID outside its allow-list, or a target other than its target. Each is
// counted as a denial with reason ReasonRevoked and logged.
func (l *listener) revoke(cfg *config) {
	l.mu.Lock()
	var revoked []*pipe
	for p := range l.conns {
		_, allowed := cfg.allowed[p.srcCID]
		if !allowed || p.targetCID != cfg.route.TargetCID || p.targetPort != cfg.route.TargetPort {
			revoked = append(revoked, p)
		}
	}
	l.mu.Unlock()
	for _, p := range revoked {
		// Uncounted before close, so ActiveConns and the active gauge no
		// longer include it when Update returns (serve's own exit, later,
		// finds it already uncounted).
		l.uncount(p)
		l.m.denials.WithLabelValues(ReasonRevoked).Inc()
		l.log.Info("Revoked vsock relay connection", "reason", ReasonRevoked, "route", cfg.route.String(),
			"sourceCID", p.srcCID, "targetCID", p.targetCID, "targetPort", p.targetPort)
		p.close()
	}
}

// stop closes the listener and every connection of the route, waits for
// them and drops the route's metric series.
func (l *listener) stop() {
	l.cancel()
	if err := l.ln.Close(); err != nil {
		l.log.Error(err, "Failed to close vsock relay listener")
	}
	<-l.acceptDone
	l.mu.Lock()
	for p := range l.conns {
		p.close()
	}
	l.mu.Unlock()
	l.wg.Wait()
	l.relay.metrics.deleteRoute(l.m)
}

// pipe is one relayed connection: src is the guest that dialed the relay,
// dst the target guest.
type pipe struct {
	l      *listener
	src    net.Conn
	srcCID uint32
	// targetCID and targetPort are where the pipe was admitted to go.
	targetCID, targetPort uint32
	last                  atomic.Int64 // monotonicNanos of the last payload in either direction

	mu     sync.Mutex
	dst    net.Conn
	closed bool
}

// setDst records the target connection; it returns false (and closes dst)
// when the pipe was closed meanwhile.
func (p *pipe) setDst(dst net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = dst.Close()
		return false
	}
	p.dst = dst
	return true
}

// close closes both ends; it is idempotent and safe from any goroutine.
func (p *pipe) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	_ = p.src.Close()
	if p.dst != nil {
		_ = p.dst.Close()
	}
}

// run copies both directions until each has ended (EOF propagated as
// CloseWrite to the other side) or either fails, then closes both ends. With
// idle > 0 a timer closes the pipe after idle without payload; with
// halfClose > 0 the pipe is closed when one direction has ended and the
// other has not within halfClose.
func (p *pipe) run(idle, halfClose time.Duration) {
	p.last.Store(monotonicNanos())
	if idle > 0 {
		done := make(chan struct{})
		defer close(done)
		go p.idleWatch(idle, done)
	}
	ended := make(chan struct{}, 2)
	go func() { p.copy(p.dst, p.src, p.l.m.toTarget); ended <- struct{}{} }()
	go func() { p.copy(p.src, p.dst, p.l.m.toSource); ended <- struct{}{} }()
	<-ended
	if halfClose > 0 {
		t := time.NewTimer(halfClose)
		select {
		case <-ended:
		case <-t.C:
			p.l.log.V(1).Info("Closed half-closed vsock relay connection", "sourceCID", p.srcCID, "after", halfClose.String())
			p.close()
			<-ended
		}
		t.Stop()
	} else {
		<-ended
	}
	p.close()
}

// idleWatch closes the pipe once no payload has moved in either direction
// for idle; it returns when done is closed.
func (p *pipe) idleWatch(idle time.Duration, done <-chan struct{}) {
	t := time.NewTimer(idle)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			since := time.Duration(monotonicNanos() - p.last.Load())
			if since < idle {
				t.Reset(idle - since)
				continue
			}
			p.l.log.V(1).Info("Closed idle vsock relay connection", "sourceCID", p.srcCID, "idle", since.String())
			p.close()
			return
		}
	}
}

// counter is the part of prometheus.Counter copy needs.
type counter interface{ Add(float64) }

// copy moves bytes from src to dst, with splice(2) between two AF_UNIX
// sockets (spliceCopy: no buffer in the relay; an idle direction holds a
// pipe's two descriptors and no pages), else through buffers (bufferCopy).
// At src's EOF it half-closes dst so the far side sees EOF while the other
// direction keeps flowing; on any other error it closes the whole pipe.
func (p *pipe) copy(dst, src net.Conn, bytes counter) {
	moved := func(n int) {
		p.last.Store(monotonicNanos())
		bytes.Add(float64(n))
	}
	ok, rerr, werr := spliceCopy(dst, src, p.l.relay.opts.BufferSize, moved)
	if !ok {
		rerr, werr = p.l.relay.copyLoop(p, dst, src, moved)
	}
	switch {
	case werr != nil:
		p.close()
	case errors.Is(rerr, io.EOF):
		if err := vsock.CloseWrite(dst); err != nil {
			p.close()
		}
	default:
		p.close()
	}
}

// bufferCopy copies src to dst until either fails; rerr is src's error
// (io.EOF at its end), werr dst's. A quiet direction waits for bytes in its
// own SmallBufferSize buffer. Once a read fills it, the direction borrows a
// BufferSize buffer from the relay (when its budget has one left; else it
// stays small, slower, never blocked) and copies every read through that one
// buffer until the stream ends or goes quiet: no bytes for lendQuiet (between
// lendQuiet/2 and lendQuiet, see below), or shortReadsToGiveBack reads in a
// row that the small buffer would have held. Then it gives the buffer back
// and waits on the small one again, so idle and trickling connections do not
// pin 64 KiB buffers and busy ones together hold at most
// Options.BufferBudget.
//
// Quiet is noticed by a read deadline, but a busy direction does not pay a
// deadline per read: the deadline is moved to lendQuiet ahead only when the
// one set last is more than lendQuiet/2 old, checked (a monotonic clock read)
// before each read. A read therefore starts with at least lendQuiet/2 left.
// The relay's idle timeout is idleWatch's, not this deadline's.
func (p *pipe) bufferCopy(dst, src net.Conn, moved func(int)) (rerr, werr error) {
	small := make([]byte, SmallBufferSize)
	quiet := p.l.relay.lendQuiet
	var big *[]byte
	var deadlineSet time.Time // when the read deadline was last moved; zero: none set
	shortReads := 0
	giveBack := func() {
		p.l.relay.giveBack(big)
		big = nil
		_ = src.SetReadDeadline(time.Time{})
		deadlineSet = time.Time{}
	}
	defer func() {
		if big != nil {
			giveBack()
		}
	}()
	for {
		buf := small
		if big != nil {
			buf = *big
			if now := time.Now(); now.Sub(deadlineSet) >= quiet/2 {
				_ = src.SetReadDeadline(now.Add(quiet))
				deadlineSet = now
			}
		}
		n, rerr := src.Read(buf)
		if n > 0 {
			w, werr := dst.Write(buf[:n])
			moved(w)
			if werr != nil {
				return nil, werr
			}
		}
		switch {
		case big != nil && errors.Is(rerr, os.ErrDeadlineExceeded):
			giveBack() // quiet: wait on the small buffer
			continue
		case big == nil && n == len(small):
			big = p.l.relay.borrow() // nil when the budget is spent: stay small
			shortReads = 0
		case big != nil && n <= len(small):
			if shortReads++; shortReads >= shortReadsToGiveBack {
				giveBack() // a trickle: the small buffer holds it
			}
		case big != nil:
			shortReads = 0
		}
		if rerr != nil {
			return rerr, nil
		}
	}
}

// shortReadsToGiveBack is how many reads in a row of at most SmallBufferSize
// bytes make a direction give its lent buffer back: a trickle of small
// messages does not need 64 KiB, and another connection's stream may. One
// short read does not (a stream's reads vary in size with the peer's pace).
const shortReadsToGiveBack = 8

package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// relayStream is one relayed connection from the allowed CID to the echo
// server, carrying frames of direction 'v' at streamRate and checking their
// echo (sequence and CRC-32 of every frame, readFrames) for the whole
// streams phase: the relay runs in the vsock backend, so the agent's kills
// must neither end it nor lose, reorder or corrupt a byte of it.
type relayStream struct {
	c    net.Conn
	sent atomic.Int64 // frames written whole
	stop chan struct{}
	send chan error // the sender's end
	read chan struct{}
	st   streamStats // the echo: frames in order and intact, gaps, the end
}

func (r *agentRun) startRelayStream(ctx context.Context) (*relayStream, error) {
	c, err := vsock.NewUnixTransport(r.vsockFS, allowedCID).Dial(ctx, vsock.HostCID, relayPort)
	if err != nil {
		return nil, err
	}
	s := &relayStream{c: c, stop: make(chan struct{}), send: make(chan error, 1), read: make(chan struct{})}
	s.st.lastNs.Store(time.Now().UnixNano())
	go func() { s.send <- sendFrames(c, 'v', s.stop, &s.sent) }()
	go func() { defer close(s.read); readFrames(c, 'v', &s.st) }()
	return s, nil
}

// broken says what ended or broke the stream before finish, or nil.
func (s *relayStream) broken() error { return s.st.broken() }

// finish stops the sender, half-closes the connection and waits (up to
// within) until the echo of every frame sent has come back, then closes
// it. It fails unless the echo ended with EOF after exactly the frames
// sent, every one in order and intact.
func (s *relayStream) finish(within time.Duration) error {
	close(s.stop)
	if err := <-s.send; err != nil {
		s.c.Close()
		<-s.read
		return fmt.Errorf("write failed: %w", err)
	}
	_ = vsock.CloseWrite(s.c)
	select {
	case <-s.read:
	case <-time.After(within):
		s.c.Close()
		<-s.read
		return fmt.Errorf("the echo did not end within %s of the half-close: %d of %d frames back", within, s.st.frames.Load(), s.sent.Load())
	}
	s.c.Close()
	if err := s.st.broken(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("the echo ended with %v, not EOF", err)
	}
	if got, sent := s.st.frames.Load(), s.sent.Load(); got != sent {
		return fmt.Errorf("%d frames sent, %d echoed back", sent, got)
	}
	return nil
}

// relayedFrames is the frames echoed so far over rs.
func relayedFrames(rs []*relayStream) int64 {
	var n int64
	for _, s := range rs {
		n += s.st.frames.Load()
	}
	return n
}

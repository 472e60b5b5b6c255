package relay

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vsock"
)

// copyRig runs one direction of bufferCopy between two in-memory pipes
// (net.Pipe: synchronous, so every Write is one Read on the other side):
// the test writes to in and reads what the loop copied from out.
type copyRig struct {
	r    *Relay
	in   net.Conn
	out  net.Conn
	done chan [2]error
}

func newCopyRig(t *testing.T, quiet time.Duration) *copyRig {
	t.Helper()
	r, err := New(Options{Transport: vsock.NewUnixTransport(t.TempDir(), vsock.HostCID)})
	if err != nil {
		t.Fatalf("failed to create relay: %v", err)
	}
	r.lendQuiet = quiet
	in, src := net.Pipe()
	dst, out := net.Pipe()
	p := &pipe{l: &listener{relay: r}, src: src, dst: dst}
	rig := &copyRig{r: r, in: in, out: out, done: make(chan [2]error, 1)}
	go func() {
		rerr, werr := p.bufferCopy(dst, src, func(int) {})
		rig.done <- [2]error{rerr, werr}
	}()
	t.Cleanup(func() {
		for _, c := range []net.Conn{in, src, dst, out} {
			_ = c.Close()
		}
		<-rig.done
	})
	return rig
}

// send writes msg into the loop and reads it back out of the far end.
func (rig *copyRig) send(g Gomega, msg []byte) {
	written := make(chan error, 1)
	go func() { _, err := rig.in.Write(msg); written <- err }()
	got := make([]byte, len(msg))
	_, err := io.ReadFull(rig.out, got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-written).To(Succeed())
	g.Expect(bytes.Equal(got, msg)).To(BeTrue())
}

// A read that fills the small buffer borrows a lent one, which the stream
// keeps through short reads until shortReadsToGiveBack of them come in a
// row: a trickle of small messages gives the lent buffer back.
func TestBufferCopyKeepsTheLentBufferUntilATrickle(t *testing.T) {
	g := NewWithT(t)
	rig := newCopyRig(t, time.Hour) // never quiet in this test
	rig.send(g, make([]byte, SmallBufferSize))
	g.Eventually(rig.r.lent.Load).Should(Equal(int64(1)), "a full small read borrows")
	rig.send(g, make([]byte, 3*SmallBufferSize)) // a longer read resets the count
	for range shortReadsToGiveBack - 1 {
		rig.send(g, []byte("tick"))
	}
	g.Expect(rig.r.lent.Load()).To(Equal(int64(1)), "short reads below the count keep the buffer")
	rig.send(g, []byte("tick"))
	g.Eventually(rig.r.lent.Load).Should(BeZero(), "%d short reads in a row give it back", shortReadsToGiveBack)
	rig.send(g, make([]byte, SmallBufferSize))
	g.Eventually(rig.r.lent.Load).Should(Equal(int64(1)), "and a stream borrows again")
}

// A direction that holds a lent buffer and gets no bytes for lendQuiet gives
// it back (the occasional read deadline), then copies on from its small
// buffer; its EOF ends the loop with io.EOF and nothing lent.
func TestBufferCopyGivesTheLentBufferBackWhenQuiet(t *testing.T) {
	g := NewWithT(t)
	rig := newCopyRig(t, 20*time.Millisecond)
	rig.send(g, make([]byte, SmallBufferSize))
	g.Eventually(rig.r.lent.Load).Should(BeZero(), "quiet: given back")
	rig.send(g, []byte("after the quiet"))
	rig.send(g, make([]byte, SmallBufferSize))
	g.Expect(rig.in.Close()).To(Succeed())
	var errs [2]error
	g.Eventually(rig.done, 5*time.Second).Should(Receive(&errs))
	g.Expect(errs[0]).To(MatchError(io.EOF))
	g.Expect(errs[1]).NotTo(HaveOccurred())
	g.Expect(rig.r.lent.Load()).To(BeZero())
	rig.done <- errs // for the cleanup
}

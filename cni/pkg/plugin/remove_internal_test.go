package plugin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// detachRecorder is a datapath.Bridge that records Detach.
type detachRecorder struct {
	datapath.Bridge
	detached []string
}

func (b *detachRecorder) Detach(_ context.Context, hostIf string) error {
	b.detached = append(b.detached, hostIf)
	return nil
}

func (b *detachRecorder) Close() {}

// TestTeardownWaitsForOVSDB: the teardown of a recorded OVS attachment
// (DEL, GC, reclaim) tries OVSDB again until it answers and then removes
// the port; when it does not answer before the context ends, the teardown
// fails with code 11 so that the caller keeps the record and the runtime
// repeats the DEL. A DEL that reported success with the port left would
// not be called again, and no runtime is bound to call GC.
func TestTeardownWaitsForOVSDB(t *testing.T) {
	errRefused := errors.New("failed to connect to OVSDB at unix:/test.sock: OVSDB unreachable: connection refused")
	// No host veth of this name exists: deleteHostVeth finds nothing to do.
	att := &state.Attachment{ContainerID: "fp-remove-test", IfName: "net1", Network: "fp-test", Datapath: netconf.DatapathOVS,
		Bridge: "fpbr-test", OVSSocket: "unix:/test.sock", HostIfName: HostIfName("fp-remove-test", "net1")}

	t.Run("answers-after-refusals", func(t *testing.T) {
		g := NewWithT(t)
		br := &detachRecorder{}
		attempts := 0
		p := New(Options{OVS: func(_ context.Context, endpoint, bridge string) (datapath.Bridge, error) {
			attempts++
			g.Expect(endpoint).To(Equal(att.OVSSocket))
			g.Expect(bridge).To(Equal(att.Bridge))
			if attempts < 3 {
				return nil, errRefused
			}
			return br, nil
		}})
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		g.Expect(p.teardown(ctx, att, nil)).To(Succeed())
		g.Expect(attempts).To(Equal(3))
		g.Expect(br.detached).To(Equal([]string{att.HostIfName}), "the port is removed")
	})

	t.Run("never-answers", func(t *testing.T) {
		g := NewWithT(t)
		attempts := 0
		p := New(Options{OVS: func(context.Context, string, string) (datapath.Bridge, error) {
			attempts++
			return nil, errRefused
		}})
		ctx, cancel := context.WithTimeout(context.Background(), 4*connectPauseFirst)
		defer cancel()
		err := p.teardown(ctx, att, nil)
		var cniErr *types.Error
		g.Expect(errors.As(err, &cniErr)).To(BeTrue(), "error %v", err)
		g.Expect(cniErr.Code).To(BeEquivalentTo(types.ErrTryAgainLater))
		g.Expect(cniErr.Msg).To(ContainSubstring("failed to remove OVS port " + att.HostIfName))
		g.Expect(cniErr.Msg).To(ContainSubstring(errRefused.Error()))
		g.Expect(attempts).To(BeNumerically(">", 1), "retried within the context")
		g.Expect(ctx.Err()).To(HaveOccurred(), "gave up only when the context ended")
	})
}

// TestConnectOVSPauses: the pause between attempts starts at
// connectPauseFirst and doubles up to connectPauseMax, so a long outage
// costs about one attempt a second.
func TestConnectOVSPauses(t *testing.T) {
	g := NewWithT(t)
	var at []time.Time
	p := New(Options{OVS: func(context.Context, string, string) (datapath.Bridge, error) {
		at = append(at, time.Now())
		return nil, errors.New("refused")
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	_, err := p.connectOVS(ctx, "unix:/test.sock", "fpbr-test", true)
	g.Expect(err).To(MatchError(ContainSubstring("failed to reach OVSDB in %d attempts: refused", len(at))))
	// Pauses of at least 50+100+200+400+800+1000+1000 ms: at most 8
	// attempts in 4 s (fewer when the machine is slow).
	g.Expect(len(at)).To(BeNumerically("<=", 8))
	g.Expect(len(at)).To(BeNumerically(">=", 2))
	for i := 1; i < len(at); i++ {
		want := min(connectPauseFirst<<(i-1), connectPauseMax)
		g.Expect(at[i].Sub(at[i-1])).To(BeNumerically(">=", want), "pause %d", i)
	}
}

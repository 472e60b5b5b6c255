package dhcp_test

import (
	"context"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/dhcp/dhcptest"
	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// TestResponderAnswersOnlyWhatTheAllocatorHolds: a guest's DISCOVER gets
// an OFFER only while the bridge's allocator holds the lease's address for
// the lease's attachment (issue 39, item 4); with the address reserved for
// nobody or for another container it gets nothing, and the message is
// counted as unconfirmed. The responder reads the reservation on every
// message, so a release seen after an OFFER stops the next one.
func TestResponderAnswersOnlyWhatTheAllocatorHolds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		owner   []string // the reservation's container ID and ifname; nil: none
		answer  bool
		release bool // after a first OFFER, the address goes to another container
	}{
		{name: "reserved for the lease", owner: []string{"c1", "net1"}, answer: true},
		{name: "reserved for nobody"},
		{name: "reserved for another container", owner: []string{"c9", "net1"}},
		{name: "reserved for the lease, then for another container", owner: []string{"c1", "net1"}, answer: true, release: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			guest := dhcptest.NewGuest(t, guestMAC, 9000)
			stateDir := t.TempDir()
			l := lease(guest, "10.56.0.7/24")
			g.Expect(leases.Write(stateDir, l)).To(Succeed())
			if tc.owner != nil {
				reserve(t, stateDir, l, tc.owner[0], tc.owner[1])
			}
			r := serveIn(t, stateDir, guest)
			c := guest.Client(t, nil, 2*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			if tc.answer {
				offer, err := c.DiscoverOffer(ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(offer.MessageType()).To(Equal(dhcpv4.MessageTypeOffer))
				g.Expect(offer.YourIPAddr.String()).To(Equal("10.56.0.7"))
				g.Eventually(r.Stats).Should(Equal(dhcp.Stats{Answered: 1}))
				if !tc.release {
					return
				}
				reserve(t, stateDir, l, "c9", "net1")
			}
			before := r.Stats()
			dctx, dcancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := c.DiscoverOffer(dctx)
				done <- err
			}()
			// The responder has seen the DISCOVER and decided: no answer.
			g.Eventually(r.Stats, 10*time.Second, 10*time.Millisecond).Should(Equal(dhcp.Stats{Answered: before.Answered, Ignored: 1, Unconfirmed: 1}))
			g.Consistently(done).ShouldNot(Receive(), "no OFFER arrives")
			dcancel()
			g.Eventually(done).Should(Receive(HaveOccurred()))
		})
	}
}

package dhcp_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/node/dhcp"
	"github.com/fastpath-io/fastpath/internal/node/dhcp/dhcptest"
	"github.com/fastpath-io/fastpath/internal/node/leases"
	"github.com/fastpath-io/fastpath/internal/testing/testutil"
)

// The manager runs a responder per bridge it is given, reports the bridges
// it cannot serve, and stops the ones it is no longer given.
func TestManagerSync(t *testing.T) {
	g := NewWithT(t)
	guest := dhcptest.NewGuest(t, guestMAC, 9000)
	stateDir := t.TempDir()
	record(t, stateDir, lease(guest, "10.56.0.7/24"))
	ctx, cancel := context.WithCancel(context.Background())
	m := dhcp.NewManager(ctx, dhcp.NewTable(filepath.Join(stateDir, leases.Dir), testr.New(t)), dhcp.DefaultServerID, 0, testr.New(t))
	t.Cleanup(func() {
		cancel()
		m.Stop()
	})

	missing := testutil.UniqueName("fpdb-")
	errs := m.Sync([]string{guest.Bridge, missing})
	g.Expect(errs).To(HaveLen(1))
	g.Expect(errs[missing]).To(MatchError(ContainSubstring("failed to find bridge " + missing)))
	r := m.Responder(guest.Bridge)
	g.Expect(r).NotTo(BeNil())
	g.Expect(m.Sync([]string{guest.Bridge})).To(BeEmpty())
	g.Expect(m.Responder(guest.Bridge)).To(BeIdenticalTo(r), "a running responder is kept")

	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	got, err := guest.Client(t, nil, 2*time.Second).Request(rctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ACK.YourIPAddr.String()).To(Equal("10.56.0.7"))

	g.Expect(m.Sync(nil)).To(BeEmpty())
	g.Expect(m.Responder(guest.Bridge)).To(BeNil())
}

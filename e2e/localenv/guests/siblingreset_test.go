package guests

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/testing/testutil"
	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// resetWithin bounds how long the guests' ends of an established sibling
// connection may take to end after their vhost-device-vsock got SIGTERM:
// it resets them and exits within 1 s (patch 0004), and a TCG guest's socat
// needs a moment to notice and exit.
const resetWithin = 5 * time.Second

// TestSiblingGuestsSeeAResetWhenTheBackendStops (issue 38) boots db-0 and
// db-1 (one Sibling group, CIDs 3 and 4) and web-0 (another group), opens a
// vsock stream from db-1 to db-0 on which db-1 writes a line every 200 ms
// and db-0 reads, and sends the group's vhost-device-vsock SIGTERM, as the
// supervisor does when the backend pod is replaced. QEMU does not reconnect
// a vhost-user vsock device, so without the reset db-0's read would wait
// forever and db-1's writes would block once db-0's credit was used up.
// With it, both ends get the RST within resetWithin: Linux takes an RST on
// an established vsock connection as the peer's close, so db-0's read
// returns end-of-file (socat exits 0) and db-1's next write fails
// (EPIPE: socat exits non-zero).
func TestSiblingGuestsSeeAResetWhenTheBackendStops(t *testing.T) {
	testutil.RequireRoot(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sup, _ := siblingSupervisor(t, "fprst", true)
	dbLink := func() backend.Status {
		for _, st := range sup.Status() {
			if st.Key == "fpg/db-link" {
				return st
			}
		}
		return backend.Status{}
	}

	guests := bootTrio(t, ctx, [3]byte{10, 253, 0}, siblingVMI, nil)
	db0, db1 := guests[0], guests[1]

	// The server marks the accept and reads; the client writes slowly, far
	// below the credit, so neither end is blocked when the reset comes.
	_, rc, err := db0.Run(ctx, "(/usr/bin/socat -d -d VSOCK-LISTEN:6000 SYSTEM:'echo accepted >/tmp/rst.accepted; exec cat >/dev/null'; "+
		"echo rc=$? >/tmp/rst.rc) >/tmp/rst.out 2>/tmp/rst.log &\n"+WaitListening("/tmp/rst.log"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc).To(Equal(0), "db-0's socat listens")
	_, rc, err = db1.Run(ctx, "((while :; do echo line; sleep 0.2; done) | /usr/bin/socat -u - VSOCK-CONNECT:3:6000; echo rc=$? >/tmp/rst.rc) >/tmp/rst.log 2>&1 &")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rc).To(Equal(0))
	g.Eventually(func() (string, error) {
		out, _, err := db0.Run(ctx, "cat /tmp/rst.accepted 2>/dev/null")
		return out, err
	}, 30*time.Second, 200*time.Millisecond).Should(ContainSubstring("accepted"), "db-0 accepts db-1's connection")
	time.Sleep(time.Second)
	// Established, and waiting: neither socat has ended.
	for _, gu := range []testGuest{db0, db1} {
		out, _, err := gu.Run(ctx, "cat /tmp/rst.rc 2>/dev/null; cat /tmp/rst.log")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).NotTo(ContainSubstring("rc="), "%s's socat is still reading", gu.Name)
	}

	before := dbLink()
	g.Expect(before.PID).NotTo(BeZero())
	g.Expect(syscall.Kill(before.PID, syscall.SIGTERM)).To(Succeed())
	sent := time.Now()
	t.Logf("sent SIGTERM to vhost-device-vsock pid %d of fpg/db-link", before.PID)

	ended := map[string]string{}
	for _, gu := range []testGuest{db0, db1} {
		var out string
		g.Eventually(func() (string, error) {
			var err error
			out, _, err = gu.Run(ctx, "cat /tmp/rst.rc 2>/dev/null")
			return out, err
		}, resetWithin, 100*time.Millisecond).Should(ContainSubstring("rc="), "%s's socat ended", gu.Name)
		log, _, _ := gu.Run(ctx, "grep -v ' [ND] ' /tmp/rst.log")
		t.Logf("%s's socat ended within %s of the SIGTERM: %s %q", gu.Name, time.Since(sent).Round(10*time.Millisecond), strings.TrimSpace(out), strings.TrimSpace(log))
		ended[gu.Name] = strings.TrimSpace(out)
	}
	g.Expect(ended).To(HaveKeyWithValue("db-0", "rc=0"), "db-0's read ended with end-of-file")
	g.Expect(ended).To(HaveKeyWithValue("db-1", Not(Equal("rc=0"))), "db-1's write failed")
	// The supervisor starts the group's process again; QEMU does not
	// connect to it, which is why the reset matters.
	g.Eventually(func() int32 { return dbLink().Restarts }, 10*time.Second, 100*time.Millisecond).Should(Equal(before.Restarts + 1))
}

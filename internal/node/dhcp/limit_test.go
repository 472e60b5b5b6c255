package dhcp

import (
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// One MAC over its budget silences only itself: another MAC on the same
// bridge is still answered (issue 39, item 5: one bucket per bridge let one
// guest silence the responder for all and answer in its place).
func TestMACLimiterIsPerMAC(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	l := newMACLimiter()
	l.now = func() time.Time { return now }
	flooder, victim := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	allowed := 0
	for i := 0; i < 10*burstPerMAC; i++ {
		if l.Allow(flooder) {
			allowed++
		}
	}
	g.Expect(allowed).To(Equal(burstPerMAC), "the flooder gets its burst and no more")
	g.Expect(l.Allow(victim)).To(BeTrue(), "another MAC is answered while the flooder is limited")
	now = now.Add(time.Second)
	g.Expect(l.Allow(flooder)).To(BeTrue(), "the flooder's bucket refills at its own rate")
}

// The buckets are bounded: past maxTrackedMACs, idle (full again) buckets
// go; a new MAC that still finds no room is not answered.
func TestMACLimiterIsBounded(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	l := newMACLimiter()
	l.now = func() time.Time { return now }
	mac := func(i int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)} }
	for i := 0; i < maxTrackedMACs; i++ {
		g.Expect(l.Allow(mac(i))).To(BeTrue())
	}
	g.Expect(l.Allow(mac(maxTrackedMACs))).To(BeFalse(), "no room while every bucket is in use")
	now = now.Add(refill)
	g.Expect(l.Allow(mac(maxTrackedMACs))).To(BeTrue(), "idle buckets make room")
	g.Expect(len(l.buckets)).To(Equal(1))
}

// chaddrIs reads a BOOTP message's chaddr past the IPv4 header (options
// included) and the UDP header.
func TestChaddrIs(t *testing.T) {
	g := NewWithT(t)
	mac := net.HardwareAddr{2, 0xfa, 0x57, 0, 0, 7}
	msg := func(ihl int, htype, hlen byte, chaddr net.HardwareAddr) []byte {
		p := make([]byte, ihl*4+8+236)
		p[0] = 0x40 | byte(ihl)
		bootp := p[ihl*4+8:]
		bootp[0], bootp[1], bootp[2] = 1, htype, hlen
		copy(bootp[28:], chaddr)
		return p
	}
	g.Expect(chaddrIs(msg(5, 1, 6, mac), mac)).To(BeTrue())
	g.Expect(chaddrIs(msg(6, 1, 6, mac), mac)).To(BeTrue(), "IPv4 options")
	g.Expect(chaddrIs(msg(5, 1, 6, net.HardwareAddr{2, 0xfa, 0x57, 0, 0, 8}), mac)).To(BeFalse(), "another guest's MAC")
	g.Expect(chaddrIs(msg(5, 6, 6, mac), mac)).To(BeFalse(), "not Ethernet")
	g.Expect(chaddrIs(msg(5, 1, 16, mac), mac)).To(BeFalse(), "another length")
	g.Expect(chaddrIs(msg(5, 1, 6, mac)[:60], mac)).To(BeFalse(), "truncated")
	g.Expect(chaddrIs(msg(4, 1, 6, mac), mac)).To(BeFalse(), "bad IHL")
}

// TestNoteLimiter: a refusal is logged once per lease, reason and holder
// every noteInterval; past maxNotes only notes old enough make room.
func TestNoteLimiter(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	n := newNoteLimiter()
	n.now = func() time.Time { return now }
	g.Expect(n.Allow("c1/net1", "other", "c2/net1")).To(BeTrue())
	g.Expect(n.Allow("c1/net1", "other", "c2/net1")).To(BeFalse(), "the same note again")
	g.Expect(n.Allow("c1/net1", "other", "c3/net1")).To(BeTrue(), "another holder")
	g.Expect(n.Allow("c1/net1", "unreserved", "")).To(BeTrue(), "another reason")
	now = now.Add(noteInterval)
	g.Expect(n.Allow("c1/net1", "other", "c2/net1")).To(BeTrue(), "after noteInterval")

	n = newNoteLimiter()
	n.now = func() time.Time { return now }
	for i := range maxNotes {
		g.Expect(n.Allow(fmt.Sprint("c", i), "unreserved", "")).To(BeTrue())
	}
	g.Expect(n.Allow("new", "unreserved", "")).To(BeFalse(), "full of recent notes")
	now = now.Add(noteInterval)
	g.Expect(n.Allow("new", "unreserved", "")).To(BeTrue(), "old notes dropped")
	g.Expect(len(n.notes)).To(BeNumerically("<=", maxNotes))
}

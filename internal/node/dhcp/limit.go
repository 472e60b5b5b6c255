package dhcp

import (
	"bytes"
	"net"
	"sync"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/time/rate"
)

// Rate limits of a Responder's answers to one client MAC, so that a guest
// flooding its bridge with DHCP costs the agent a bounded amount of work (a
// lease lookup and a reply each) and silences nobody but itself: a guest
// asks a handful of times per boot. Each MAC has its own token bucket;
// with port security a port sends one MAC only, and the responder counts a
// message under its frame's source MAC (sourceChecked), never under a
// chaddr the guest wrote.
const (
	ratePerMAC  = 5
	burstPerMAC = 10
	// maxTrackedMACs bounds the buckets kept: past it, buckets idle long
	// enough to be full again are dropped (losslessly), and a MAC that still
	// finds no room is not answered until one frees.
	maxTrackedMACs = 4096
)

// macLimiter is one token bucket per client MAC.
type macLimiter struct {
	mu      sync.Mutex
	buckets map[string]*macBucket
	now     func() time.Time
}

type macBucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newMACLimiter() *macLimiter {
	return &macLimiter{buckets: map[string]*macBucket{}, now: time.Now}
}

// refill is how long an unused bucket takes to be full again: a bucket idle
// that long is the same as a new one.
const refill = time.Duration(burstPerMAC) * time.Second / ratePerMAC

// Allow reports whether a message of mac may be answered now.
func (l *macLimiter) Allow(mac net.HardwareAddr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b, ok := l.buckets[string(mac)]
	if !ok {
		if len(l.buckets) >= maxTrackedMACs {
			for k, old := range l.buckets {
				if now.Sub(old.last) >= refill {
					delete(l.buckets, k)
				}
			}
			if len(l.buckets) >= maxTrackedMACs {
				return false
			}
		}
		b = &macBucket{lim: rate.NewLimiter(ratePerMAC, burstPerMAC)}
		l.buckets[string(mac)] = b
	}
	b.last = now
	return b.lim.AllowN(now, 1)
}

// chaddrIs reports whether the BOOTP message in ipPacket (an IPv4 packet
// carrying UDP, as the responder's datagram socket reads it) has client
// hardware address mac (RFC 2131 §2: chaddr at offset 28, htype 1, hlen 6).
func chaddrIs(ipPacket []byte, mac net.HardwareAddr) bool {
	if len(ipPacket) < 20 || len(mac) != 6 {
		return false
	}
	ihl := int(ipPacket[0]&0x0f) * 4
	bootp := ipPacket[min(len(ipPacket), ihl+8):]
	if ihl < 20 || len(bootp) < 28+6 || bootp[1] != 1 || bootp[2] != 6 {
		return false
	}
	return bytes.Equal(bootp[28:34], mac)
}

// sourceChecked reads from the responder's packet socket only messages
// whose chaddr is the frame's source MAC: the responder answers chaddr and
// rate-limits by it, so a guest must not speak for another MAC. Others are
// passed to ignore and skipped.
type sourceChecked struct {
	*packet.Conn
	ignore func(from net.HardwareAddr)
}

func (c sourceChecked) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, addr, err := c.Conn.ReadFrom(b)
		if err != nil {
			return n, addr, err
		}
		if pa, ok := addr.(*packet.Addr); ok && chaddrIs(b[:n], pa.HardwareAddr) {
			return n, addr, nil
		}
		var from net.HardwareAddr
		if pa, ok := addr.(*packet.Addr); ok {
			from = pa.HardwareAddr
		}
		c.ignore(from)
	}
}

// noteInterval is how often the same note (a lease refused or answered
// unchecked for one reason and holder) is logged again: a guest asks a
// handful of times per boot and again at each retry, and one line per
// lease and reason says all there is to say.
const noteInterval = 10 * time.Minute

// maxNotes bounds the notes remembered; past it, notes older than
// noteInterval are dropped and a new one that still finds no room is not
// logged.
const maxNotes = 1024

// noteLimiter lets a note be logged once per key every noteInterval.
type noteLimiter struct {
	mu    sync.Mutex
	notes map[[3]string]time.Time
	now   func() time.Time
}

func newNoteLimiter() *noteLimiter {
	return &noteLimiter{notes: map[[3]string]time.Time{}, now: time.Now}
}

// Allow reports whether the note of lease for reason and holder is to be
// logged now, and if so remembers when.
func (n *noteLimiter) Allow(lease, reason, holder string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	now, k := n.now(), [3]string{lease, reason, holder}
	if last, ok := n.notes[k]; ok && now.Sub(last) < noteInterval {
		return false
	}
	if _, ok := n.notes[k]; !ok && len(n.notes) >= maxNotes {
		for old, at := range n.notes {
			if now.Sub(at) >= noteInterval {
				delete(n.notes, old)
			}
		}
		if len(n.notes) >= maxNotes {
			return false
		}
	}
	n.notes[k] = now
	return true
}

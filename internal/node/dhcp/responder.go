package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/fastpath-io/fastpath/internal/node/leases"
)

// Ports of DHCPv4 (RFC 2131 §4.1).
const (
	serverPort = 67
	clientPort = 68
)

// Config is what a Responder serves.
type Config struct {
	// Bridge is the Linux bridge to answer on.
	Bridge string
	// Leases are the node's leases; only those of Bridge are answered.
	Leases *Table
	// ServerID is the server identifier and the replies' source address;
	// DefaultServerID when invalid (zero).
	ServerID netip.Addr
	// LeaseTime is the lease time offered; DefaultLeaseTime when 0.
	LeaseTime time.Duration
	// Log gets what the responder answers and ignores (V(1)) and its errors.
	Log logr.Logger
}

// Stats count a Responder's messages.
type Stats struct {
	// Answered are the OFFERs, ACKs and NAKs sent.
	Answered uint64
	// Ignored are the messages that got no answer (no lease, another
	// server, not a DISCOVER or REQUEST, rate limited, ambiguous MAC, a
	// lease its allocator does not confirm).
	Ignored uint64
	// Unconfirmed are those of Ignored whose lease its allocator does not
	// confirm: the address is reserved for nobody or for another
	// attachment, or the reservation could not be read.
	Unconfirmed uint64
}

// Responder answers DHCPv4 on one bridge. Run it with Run.
type Responder struct {
	cfg                            Config
	limit                          *macLimiter
	notes                          *noteLimiter
	answered, ignored, unconfirmed atomic.Uint64
	ready                          chan struct{}
}

// New returns the responder of cfg.
func New(cfg Config) *Responder {
	if !cfg.ServerID.IsValid() {
		cfg.ServerID = DefaultServerID
	}
	if cfg.LeaseTime == 0 {
		cfg.LeaseTime = DefaultLeaseTime
	}
	return &Responder{cfg: cfg, limit: newMACLimiter(), notes: newNoteLimiter(), ready: make(chan struct{})}
}

// Ready is closed once Run's socket receives.
func (r *Responder) Ready() <-chan struct{} { return r.ready }

// Stats returns the counts so far.
func (r *Responder) Stats() Stats {
	return Stats{Answered: r.answered.Load(), Ignored: r.ignored.Load(), Unconfirmed: r.unconfirmed.Load()}
}

// Run answers on the bridge until ctx is done (then it returns nil) or the
// socket fails. The socket is an AF_PACKET socket of the calling thread's
// network namespace: it needs CAP_NET_RAW. A missing bridge is an error.
func (r *Responder) Run(ctx context.Context) error {
	srv, err := r.listen()
	if err != nil {
		return err
	}
	return r.serve(ctx, srv)
}

// listen opens the responder's socket on the bridge; from its return on,
// what arrives there is read.
func (r *Responder) listen() (*server4.Server, error) {
	ifi, err := net.InterfaceByName(r.cfg.Bridge)
	if err != nil {
		return nil, fmt.Errorf("failed to find bridge %s: %w", r.cfg.Bridge, err)
	}
	raw, err := packet.Listen(ifi, packet.Datagram, unix.ETH_P_IP, &packet.Config{Filter: serverPortFilter})
	if err != nil {
		return nil, fmt.Errorf("failed to open a packet socket on bridge %s (it needs CAP_NET_RAW): %w", r.cfg.Bridge, err)
	}
	srv, err := server4.NewServer("", nil, func(_ net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) { r.handle(raw, peer, m) },
		server4.WithConn(nclient4.NewBroadcastUDPConn(sourceChecked{Conn: raw, ignore: r.ignoreSpoofed}, &net.UDPAddr{Port: serverPort})))
	if err != nil {
		raw.Close()
		return nil, fmt.Errorf("failed to start the DHCP server on bridge %s: %w", r.cfg.Bridge, err)
	}
	close(r.ready)
	return srv, nil
}

// serve answers through srv until ctx is done (nil) or srv fails.
func (r *Responder) serve(ctx context.Context, srv *server4.Server) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	r.cfg.Log.Info("Answering DHCPv4", "bridge", r.cfg.Bridge, "serverID", r.cfg.ServerID)
	select {
	case <-ctx.Done():
		srv.Close()
		<-done
		return nil
	case err := <-done:
		if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
			return nil
		}
		return fmt.Errorf("failed to serve DHCPv4 on bridge %s: %w", r.cfg.Bridge, err)
	}
}

// handle answers m, which came from peer (255.255.255.255:68 when the
// client has no address yet), through raw.
func (r *Responder) handle(raw *packet.Conn, peer net.Addr, m *dhcpv4.DHCPv4) {
	log := r.cfg.Log.WithValues("bridge", r.cfg.Bridge, "mac", m.ClientHWAddr.String(), "xid", m.TransactionID.String(), "type", m.MessageType().String())
	if !r.limit.Allow(m.ClientHWAddr) {
		r.ignored.Add(1)
		log.V(1).Info("Ignoring DHCP message over the rate limit of its MAC")
		return
	}
	l, err := r.cfg.Leases.Lookup(r.cfg.Bridge, m.ClientHWAddr)
	if err != nil {
		r.ignored.Add(1)
		log.Error(err, "Ignoring DHCP message")
		return
	}
	if l != nil && !r.confirmed(log, l) {
		r.ignored.Add(1)
		r.unconfirmed.Add(1)
		return
	}
	resp, err := reply(m, l, r.cfg.ServerID, r.cfg.LeaseTime)
	if err != nil {
		r.ignored.Add(1)
		if errors.Is(err, errIgnore) {
			log.V(1).Info("Ignoring DHCP message", "reason", err.Error())
		} else {
			log.Error(err, "Failed to build the DHCP reply")
		}
		return
	}
	// IP destination: the client's address when it has one (renewing),
	// else the limited broadcast its stack accepts without an address
	// (RFC 2131 §4.1); a NAK always the broadcast. Ethernet destination:
	// the client's MAC either way.
	dst := &net.UDPAddr{IP: net.IPv4bcast, Port: clientPort}
	if p, ok := peer.(*net.UDPAddr); ok && resp.MessageType() != dhcpv4.MessageTypeNak && !p.IP.Equal(net.IPv4bcast) && !p.IP.IsUnspecified() {
		dst.IP = p.IP
	}
	src := &net.UDPAddr{IP: net.IP(r.cfg.ServerID.AsSlice()), Port: serverPort}
	out := nclient4.NewBroadcastUDPConn(toMAC{Conn: raw, mac: m.ClientHWAddr}, src)
	if _, err := out.WriteTo(resp.ToBytes(), dst); err != nil {
		r.ignored.Add(1)
		log.Error(err, "Failed to send the DHCP reply")
		return
	}
	r.answered.Add(1)
	log.V(1).Info("Answered DHCP message", "reply", resp.MessageType().String(), "address", l.Address.String())
}

// confirmed reports whether l's allocator holds l's address for l's
// attachment (Table.Reservation), so that l may be answered: a lease whose
// address is reserved for nobody (released, or never allocated here) or
// for another attachment is not, nor one whose reservation cannot be read.
// A lease whose allocator the responder cannot read (another IPAM type; an
// old lease without host-local directories) is answered as before. Each
// refusal and each unchecked answer is logged with the lease's and the
// holder's IDs, once per lease, holder and reason every noteInterval.
func (r *Responder) confirmed(log logr.Logger, l *leases.Lease) bool {
	lease := l.ContainerID + "/" + l.IfName
	res, err := r.cfg.Leases.Reservation(l)
	switch {
	case err != nil:
		if r.notes.Allow(lease, "error", "") {
			log.Error(err, "Not answering: the lease's reservation cannot be read", "lease", lease, "address", l.Address.Addr().String())
		}
		return false
	case !res.Checked():
		if r.notes.Allow(lease, "unchecked", "") {
			log.Info("Answering a lease whose allocator cannot be read", "lease", lease, "address", l.Address.Addr().String(),
				"ipamType", l.IPAMType, "ipamNetwork", l.IPAMNetwork)
		}
		return true
	case res.Confirms(l):
		return true
	case !res.Found:
		if r.notes.Allow(lease, "unreserved", "") {
			log.Info("Not answering: the lease's address is reserved for nobody", "lease", lease, "address", l.Address.Addr().String(), "allocator", res.Dir)
		}
	default:
		if r.notes.Allow(lease, "other", res.Holder()) {
			log.Info("Not answering: the lease's address is reserved for another attachment", "lease", lease, "holder", res.Holder(),
				"address", l.Address.Addr().String(), "allocator", res.Dir)
		}
	}
	return false
}

// ignoreSpoofed counts a message whose chaddr is not its frame's source MAC.
func (r *Responder) ignoreSpoofed(from net.HardwareAddr) {
	r.ignored.Add(1)
	r.cfg.Log.V(1).Info("Ignoring DHCP message whose client hardware address is not its frame's source", "bridge", r.cfg.Bridge, "source", from.String())
}

// toMAC sends every frame to one MAC: nclient4's raw UDP conn frames
// IPv4/UDP and would send to the Ethernet broadcast.
type toMAC struct {
	*packet.Conn
	mac net.HardwareAddr
}

func (c toMAC) WriteTo(b []byte, _ net.Addr) (int, error) {
	return c.Conn.WriteTo(b, &packet.Addr{HardwareAddr: c.mac})
}

// serverPortFilter passes IPv4 UDP datagrams to port 67 that are not
// fragments: the socket sees frames from the network header on (a
// datagram packet socket), and everything else a guest sends to the bridge
// stays in the kernel.
var serverPortFilter = mustAssemble([]bpf.Instruction{
	bpf.LoadAbsolute{Off: 9, Size: 1}, // IPv4 protocol
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_UDP, SkipTrue: 5},
	bpf.LoadAbsolute{Off: 6, Size: 2}, // flags and fragment offset
	bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 0x1fff, SkipTrue: 3},
	bpf.LoadMemShift{Off: 0},          // X = IPv4 header length
	bpf.LoadIndirect{Off: 2, Size: 2}, // UDP destination port
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: serverPort, SkipTrue: 1},
	bpf.RetConstant{Val: 0xffff},
	bpf.RetConstant{Val: 0},
})

func mustAssemble(insns []bpf.Instruction) []bpf.RawInstruction {
	raw, err := bpf.Assemble(insns)
	if err != nil {
		panic(err)
	}
	return raw
}

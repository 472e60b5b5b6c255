package plugin

import (
	"context"
	"fmt"
	"time"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// open returns the datapath of conf, for the verbs that act on the
// network as configured (ADD, CHECK, STATUS, GC); for OVS it connects to
// OVSDB now, through p.ovs, which a plugin built without OVS does not have
// (it hands such invocations over before they get here; errNoOVS
// otherwise). On success the caller must close it.
func (p *Plugin) open(ctx context.Context, conf *netconf.NetConf) (datapath.Datapath, error) {
	dp, err := p.dispatch(conf.Datapath, conf.Bridge, conf.OVS.Socket, nil, false)
	if err != nil {
		return nil, err
	}
	if v, ok := dp.(*vethDatapath); ok {
		if _, err := v.bridge(ctx); err != nil {
			return nil, err
		}
	}
	return dp, nil
}

// recorded returns the datapath that made the recorded attachment a (its
// own datapath, bridge and OVSDB endpoint, which may no longer be the
// netconf's), for the verbs that act on what ADD left (repeated ADD, DEL,
// GC, reclaim). It connects to nothing until a method needs it, and then
// keeps trying until the caller's context ends (connectOVS): a DEL that
// reports success is not called again and no runtime is bound to call GC
// (Multus does not pass it on), so what the record names must be removed
// now or the verb must fail. conns, when not nil, shares OVSDB connections
// between records (GC) and keeps them open after Close. The caller must
// close it.
func (p *Plugin) recorded(a *state.Attachment, conns ovsClients) (datapath.Datapath, error) {
	return p.dispatch(a.Datapath, a.Bridge, a.OVSSocket, conns, true)
}

// dispatch is the one place that maps netconf "datapath" name to its
// implementation: a veth pair on the Linux bridge or on the OVS bridge
// named bridge (OVSDB at socket, wellknown.DefaultOVSSocket when ""), or a
// macvtap on the lower device named bridge. An OVS bridge is connected
// lazily (see vethDatapath.bridge), once or, when retry is true, until it
// answers or the context ends (connectOVS), and through conns when not
// nil. An unknown name is an error.
func (p *Plugin) dispatch(name, bridge, socket string, conns ovsClients, retry bool) (datapath.Datapath, error) {
	switch name {
	case netconf.DatapathLinuxBridge:
		br := &linuxBridge{bridge: bridge}
		return &vethDatapath{name: name, owned: true, connect: func(context.Context) (datapath.Bridge, error) { return br, nil }}, nil
	case netconf.DatapathOVS:
		d := &vethDatapath{name: name, ovsSocket: socket, owned: conns == nil}
		if socket == "" {
			socket = wellknown.DefaultOVSSocket
		}
		if p.ovs == nil {
			d.missing = p.errNoOVS()
		}
		d.connect = func(ctx context.Context) (datapath.Bridge, error) {
			if c := conns[socket]; c != nil {
				return c, nil
			}
			c, err := p.connectOVS(ctx, socket, bridge, retry)
			if err != nil {
				return nil, err
			}
			if conns != nil {
				conns[socket] = c
			}
			return c, nil
		}
		return d, nil
	case netconf.DatapathMacvtap:
		return &macvtapDatapath{lower: bridge}, nil
	}
	return nil, fmt.Errorf("failed to open datapath %q: unknown datapath", name)
}

// Pauses between two attempts of connectOVS: the first, doubled after each
// failed attempt up to the last. OVSDB refuses connections while
// ovsdb-server restarts (the socket is missing or nobody accepts) and when
// its listen backlog is full, which a connect on a Unix socket reports at
// once (EAGAIN) instead of waiting.
const (
	connectPauseFirst = 50 * time.Millisecond
	connectPauseMax   = time.Second
)

// connectOVS opens the OVS bridge named bridge through OVSDB at socket.
// With retry it tries again after each failure, pausing connectPauseFirst
// doubling up to connectPauseMax, until ctx ends: an ovsdb-server that is
// slow to answer (a loaded node) has the whole of ctx for one attempt, one
// that refuses is tried again. Each failed attempt is logged. The error is
// the last attempt's.
func (p *Plugin) connectOVS(ctx context.Context, socket, bridge string, retry bool) (datapath.Bridge, error) {
	pause := connectPauseFirst
	for attempt := 1; ; attempt++ {
		br, err := p.ovs(ctx, socket, bridge)
		if err == nil || !retry {
			return br, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("failed to reach OVSDB in %d attempts: %w", attempt, err)
		}
		logger.Printf("Retrying the OVSDB connection endpoint=%s attempt=%d pause=%s error=%q", socket, attempt, pause, err)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("failed to reach OVSDB in %d attempts: %w", attempt, err)
		case <-t.C:
		}
		pause = min(2*pause, connectPauseMax)
	}
}

// ovsClients caches one OVSDB connection (an open OVS bridge) per endpoint
// during a GC.
type ovsClients map[string]datapath.Bridge

func (m ovsClients) close() {
	for _, c := range m {
		c.Close()
	}
}

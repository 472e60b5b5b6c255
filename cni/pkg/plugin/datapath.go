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
	dp, err := p.dispatch(conf.Datapath, conf.Bridge, conf.OVS.Socket, nil, 0)
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
// GC, reclaim). It connects to nothing until a method needs it; conns, when
// not nil, shares OVSDB connections between records (GC) and keeps them
// open after Close. The caller must close it.
func (p *Plugin) recorded(a *state.Attachment, conns ovsClients) (datapath.Datapath, error) {
	return p.dispatch(a.Datapath, a.Bridge, a.OVSSocket, conns, recordConnectTimeout)
}

// recordConnectTimeout bounds the OVSDB connection made to remove a
// recorded attachment's port: DEL must not hang on Open vSwitch (it keeps
// the record for GC instead).
const recordConnectTimeout = 10 * time.Second

// dispatch is the one place that maps netconf "datapath" name to its
// implementation: a veth pair on the Linux bridge or on the OVS bridge
// named bridge (OVSDB at socket, wellknown.DefaultOVSSocket when ""), or a
// macvtap on the lower device named bridge. An OVS bridge is connected
// lazily (see vethDatapath.bridge), within timeout when it is not 0, and
// through conns when not nil. An unknown name is an error.
func (p *Plugin) dispatch(name, bridge, socket string, conns ovsClients, timeout time.Duration) (datapath.Datapath, error) {
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
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			c, err := p.ovs(ctx, socket, bridge)
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

// ovsClients caches one OVSDB connection (an open OVS bridge) per endpoint
// during a GC.
type ovsClients map[string]datapath.Bridge

func (m ovsClients) close() {
	for _, c := range m {
		c.Close()
	}
}

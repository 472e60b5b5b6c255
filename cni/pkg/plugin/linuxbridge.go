package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"

	"github.com/fastpath-io/fastpath/api/netconf"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/cni/pkg/datapath"
	"github.com/fastpath-io/fastpath/cni/pkg/linuxbridge"
	"github.com/fastpath-io/fastpath/cni/pkg/state"
)

// linuxBridge is the datapath.Bridge of datapath LinuxBridge: the host end
// is enslaved to a Linux bridge. It keeps the bridge link it read, so that
// one ADD looks the bridge up once.
type linuxBridge struct {
	bridge string
	br     *netlink.Bridge
}

// lookup returns the bridge link, read once.
func (d *linuxBridge) lookup() (*netlink.Bridge, error) {
	if d.br != nil {
		return d.br, nil
	}
	br, err := linuxbridge.Bridge(d.bridge)
	if err != nil {
		return nil, err
	}
	d.br = br
	return br, nil
}

// BridgeMTU also refuses (datapath.NotMarkedError) a bridge without the
// agent's alias.
func (d *linuxBridge) BridgeMTU(context.Context) (int, error) {
	br, err := d.lookup()
	if errors.Is(err, linuxbridge.ErrBridgeNotFound) {
		return 0, fmt.Errorf("%w: %w", datapath.ErrBridgeMissing, err)
	}
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(br.Alias, wellknown.MarkerKey+"=") {
		return 0, datapath.NotMarkedError(d.bridge, netconf.DatapathLinuxBridge, fmt.Sprintf("its alias is %q, not %s=<agent>", br.Alias, wellknown.MarkerKey))
	}
	return br.MTU, nil
}

func (d *linuxBridge) Preflight(context.Context, map[string]bool) error { return nil }

// Attach enslaves host to the bridge, sets its alias and sets it up in one
// netlink request. It first refuses a pod interface MAC (a.MAC, which the
// guest of a managedTap binding takes too) that a port of the bridge, the
// bridge or the bridge's forwarding database already has (issue 39, item
// 4): two ports with one MAC steal each other's frames, and port security
// would pin both to the same identity. The caller's rollback removes the
// veth.
func (d *linuxBridge) Attach(_ context.Context, a *state.Attachment, host datapath.HostEnd, _ string) error {
	br, err := d.lookup()
	if err != nil {
		return err
	}
	mac, err := net.ParseMAC(a.MAC)
	if err != nil {
		return fmt.Errorf("failed to parse MAC %q of %s: %w", a.MAC, a.IfName, err)
	}
	holder, err := linuxbridge.MACHolder(br, mac)
	if err != nil {
		return err
	}
	if holder != "" {
		return datapath.MACTakenError(mac, "bridge "+d.bridge, holder)
	}
	if err := host.SetLink(br.Index, true); err != nil {
		return fmt.Errorf("failed to attach %s to bridge %s: %w", host.Name, d.bridge, err)
	}
	return nil
}

// Detach is a no-op: deleting the veth takes it off the bridge.
func (d *linuxBridge) Detach(context.Context, string) error { return nil }

func (d *linuxBridge) Verify(_ context.Context, hostIf string) error {
	return linuxbridge.Verify(hostIf, d.bridge)
}

func (d *linuxBridge) Ports(context.Context) ([]datapath.Port, error) {
	br, err := linuxbridge.Bridge(d.bridge)
	if errors.Is(err, linuxbridge.ErrBridgeNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	links, err := linuxbridge.Ports(br)
	if err != nil {
		return nil, err
	}
	var out []datapath.Port
	for _, l := range links {
		if p, ok := parseAlias(l.Attrs().Alias); ok {
			p.HostIf = l.Attrs().Name
			out = append(out, p)
		}
	}
	return out, nil
}

func (d *linuxBridge) Status(context.Context) error {
	br, err := linuxbridge.Bridge(d.bridge)
	if errors.Is(err, linuxbridge.ErrBridgeNotFound) {
		return datapath.BridgeMissingError(d.bridge, netconf.DatapathLinuxBridge, types.ErrPluginNotAvailable)
	}
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	if br.Flags&net.FlagUp == 0 {
		return types.NewError(types.ErrLimitedConnectivity, fmt.Sprintf(
			"bridge %s is down: its ports do not forward; the node agent fastpath-agent sets it up", d.bridge), "")
	}
	return nil
}

func (d *linuxBridge) Close() {}

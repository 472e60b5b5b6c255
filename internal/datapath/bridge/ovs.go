package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/datapath/ovsdb"
)

func (m *Manager) ovsClient(ctx context.Context) (*ovsdb.Client, error) {
	if m.OVS == nil {
		return nil, errOVSNotConfigured
	}
	return m.OVS.Client(ctx)
}

// sameDatapathType compares datapath_type values; OVSDB's empty string means
// "system".
func sameDatapathType(a, b string) bool {
	norm := func(s string) string {
		if s == "" {
			return ovsdb.DatapathSystem
		}
		return s
	}
	return norm(a) == norm(b)
}

func (m *Manager) ensureOVS(ctx context.Context, spec Spec) (State, error) {
	st := State{Name: spec.Name, Datapath: fastpathv1alpha1.DatapathOVS}
	c, err := m.ovsClient(ctx)
	if err != nil {
		return st, fmt.Errorf("failed to ensure OVS bridge %s: %w", spec.Name, err)
	}
	b, err := c.Bridge(ctx, spec.Name)
	if err != nil {
		return st, err
	}
	if b == nil {
		// The bridge's internal interface takes the bridge's name in the
		// kernel; a Linux bridge of that name would make it fail.
		if l, err := netlink.LinkByName(spec.Name); err == nil && l.Type() == linkTypeBridge {
			return st, fmt.Errorf("failed to ensure OVS bridge %s: a Linux bridge of that name exists; rename it or the attachment's bridge", spec.Name)
		}
		err := c.CreateBridge(ctx, ovsdb.BridgeSpec{
			Name:         spec.Name,
			DatapathType: m.datapathType(),
			MTU:          spec.MTU,
			ExternalIDs:  map[string]string{wellknown.MarkerKey: m.marker()},
		})
		if err != nil {
			return st, err
		}
		st.Created = true
		m.Log.Info("Created OVS bridge", "bridge", spec.Name, "datapathType", m.datapathType(), "mtu", spec.MTU)
		if b, err = c.WaitBridge(ctx, spec.Name); err != nil {
			return st, err
		}
	}

	if b.ExternalIDs[wellknown.MarkerKey] != m.marker() {
		st, _ = m.inspectOVS(ctx, c, spec.Name)
		return st, fmt.Errorf("%w: OVS bridge %s exists without external_ids:%s=%s: left unchanged; delete it or name another bridge in the FastPathNetwork's spec.bridge",
			ErrNotMarked, spec.Name, wellknown.MarkerKey, m.marker())
	}
	if !sameDatapathType(b.DatapathType, m.datapathType()) {
		ports, err := c.PortNames(ctx, b)
		if err != nil {
			return st, err
		}
		if len(ports) == 0 {
			if err := c.SetDatapathType(ctx, spec.Name, m.datapathType()); err != nil {
				return st, err
			}
			m.Log.Info("Set OVS bridge datapath type", "bridge", spec.Name, "from", b.DatapathType, "to", m.datapathType())
		} else {
			// Moving a bridge to another datapath recreates it under its
			// ports: traffic stops. Leave it to the admin.
			st.Message = fmt.Sprintf("datapath_type is %q, not the configured %q; left unchanged because the bridge has %d ports", b.DatapathType, m.datapathType(), len(ports))
		}
	}

	iface, err := c.Interface(ctx, spec.Name)
	if err != nil {
		return st, err
	}
	if iface == nil {
		return st, fmt.Errorf("failed to ensure OVS bridge %s: it has no internal interface %s to carry the MTU", spec.Name, spec.Name)
	}
	if iface.MTURequest == nil || *iface.MTURequest != spec.MTU {
		if err := c.SetMTURequest(ctx, spec.Name, spec.MTU); err != nil {
			return st, err
		}
		m.Log.Info("Set OVS bridge mtu_request", "bridge", spec.Name, "mtu", spec.MTU)
	}

	// ovs-vswitchd applies mtu_request asynchronously and reports the result
	// in the ephemeral mtu column.
	wctx, cancel := context.WithTimeout(ctx, m.mtuTimeout())
	defer cancel()
	iface, werr := c.WaitInterface(wctx, spec.Name, func(i *ovsdb.Interface) bool {
		return (i.MTU != nil && *i.MTU == spec.MTU) || (i.Error != nil && *i.Error != "")
	})
	created, msg := st.Created, st.Message
	st, ierr := m.inspectOVS(ctx, c, spec.Name)
	st.Created, st.Message = created, msg
	if ierr != nil {
		return st, ierr
	}
	switch {
	case iface != nil && iface.Error != nil && *iface.Error != "":
		return st, fmt.Errorf("failed to ensure OVS bridge %s: ovs-vswitchd reports on its interface: %s", spec.Name, *iface.Error)
	case werr != nil:
		return st, fmt.Errorf("failed to ensure OVS bridge %s: ovs-vswitchd did not apply mtu_request %d within %s (mtu is %d; is ovs-vswitchd running?): %w",
			spec.Name, spec.MTU, m.mtuTimeout(), st.MTU, werr)
	}

	// Bring the internal interface up, as `ip link set <bridge> up` would.
	link, err := netlink.LinkByName(spec.Name)
	if err != nil {
		return st, fmt.Errorf("failed to find the interface of OVS bridge %s in the kernel: %w", spec.Name, err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return st, fmt.Errorf("failed to bring up OVS bridge %s: %w", spec.Name, err)
		}
	}
	st.Up = true
	return st, nil
}

// inspectOVS describes the OVS bridge name as OVSDB and the kernel see it.
func (m *Manager) inspectOVS(ctx context.Context, c *ovsdb.Client, name string) (State, error) {
	st := State{Name: name, Datapath: fastpathv1alpha1.DatapathOVS}
	b, err := c.Bridge(ctx, name)
	if err != nil || b == nil {
		return st, err
	}
	st.Exists = true
	st.Managed = b.ExternalIDs[wellknown.MarkerKey] == m.marker()
	if st.Ports, err = c.PortNames(ctx, b); err != nil {
		return st, err
	}
	iface, err := c.Interface(ctx, name)
	if err != nil {
		return st, err
	}
	if iface != nil && iface.MTU != nil {
		st.MTU = *iface.MTU
	}
	if link, err := netlink.LinkByName(name); err == nil {
		st.Up = link.Attrs().Flags&net.FlagUp != 0
	} else if !isLinkNotFound(err) {
		return st, fmt.Errorf("failed to look up the interface of OVS bridge %s: %w", name, err)
	}
	return st, nil
}

func (m *Manager) managedOVS(ctx context.Context) ([]State, error) {
	c, err := m.ovsClient(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list OVS bridges: %w", err)
	}
	marker := m.marker()
	bs, err := c.Bridges(ctx, func(b *ovsdb.Bridge) bool { return b.ExternalIDs[wellknown.MarkerKey] == marker })
	if err != nil {
		return nil, err
	}
	var out []State
	var errs []error
	for _, b := range bs {
		st, err := m.inspectOVS(ctx, c, b.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, st)
	}
	return out, errors.Join(errs...)
}

// removeManagedOVS deletes the OVS bridges carrying the marker.
func (m *Manager) removeManagedOVS(ctx context.Context) ([]string, error) {
	c, err := m.ovsClient(ctx)
	if err != nil {
		return nil, err
	}
	marker := m.marker()
	bs, err := c.Bridges(ctx, func(b *ovsdb.Bridge) bool { return b.ExternalIDs[wellknown.MarkerKey] == marker })
	if err != nil {
		return nil, fmt.Errorf("failed to list OVS bridges: %w", err)
	}
	var out []string
	var errs []error
	for _, b := range bs {
		if err := c.DeleteBridge(ctx, b.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		m.Log.Info("Deleted OVS bridge", "bridge", b.Name)
		out = append(out, b.Name)
	}
	return out, errors.Join(errs...)
}

// removeOVS deletes the marked, port-less OVS bridge name.
func (m *Manager) removeOVS(ctx context.Context, name string) error {
	c, err := m.ovsClient(ctx)
	if err != nil {
		return fmt.Errorf("failed to remove OVS bridge %s: %w", name, err)
	}
	st, err := m.inspectOVS(ctx, c, name)
	if err != nil || !st.Exists {
		return err
	}
	if !st.Managed {
		return fmt.Errorf("failed to remove OVS bridge %s: %w", name, ErrNotMarked)
	}
	if len(st.Ports) > 0 {
		return fmt.Errorf("failed to remove OVS bridge %s: %w (%s)", name, ErrInUse, strings.Join(st.Ports, ", "))
	}
	if err := c.DeleteBridge(ctx, name); err != nil {
		return fmt.Errorf("failed to delete OVS bridge %s: %w", name, err)
	}
	m.Log.Info("Deleted an OVS bridge no FastPathNetwork names and no port uses", "bridge", name)
	return nil
}

package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/datapath/bridge"
	"github.com/fastpath-io/fastpath/internal/node/deviceplugin"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// probe reports the node's capabilities.
func (r *Reconciler) probe(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.caps = r.Prober.Probe(ctx)
	r.siblingCapabilities(&s.observed)
	return ctrl.Result{}, nil
}

// installCNI installs the CNI binary when r.CNI is set.
func (r *Reconciler) installCNI(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.CNI == nil {
		return ctrl.Result{}, nil
	}
	res, err := r.CNI.Ensure()
	if err != nil {
		s.cniErr = err
		ctrl.LoggerFrom(ctx).Error(err, "Failed to install the CNI binary")
		return r.retry(), nil
	}
	s.cni = res.String()
	return ctrl.Result{}, nil
}

// tuneSysctls checks (and, when enabled, raises) the sysctls when r.Sysctls is set.
func (r *Reconciler) tuneSysctls(ctx context.Context, s *scope) (ctrl.Result, error) {
	if r.Sysctls == nil {
		return ctrl.Result{}, nil
	}
	s.sysctls, s.sysctlErr = r.Sysctls.Ensure()
	if s.sysctlErr != nil {
		ctrl.LoggerFrom(ctx).Error(s.sysctlErr, "Failed to tune sysctls")
		return r.retry(), nil
	}
	return ctrl.Result{}, nil
}

// programRelay feeds the relay this node's routes and reads back its
// listeners and limits, after the update: a relay in the vsock backend
// process (backend.RelayClient) knows them from its answer. A relay that
// reports no limits (a backend that has not answered) leaves
// status.relayLimits out; its Update error is VSOCKRelayReady's.
func (r *Reconciler) programRelay(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.routes, s.routeProbs = RelayRoutes(s.attachments, r.NodeName)
	serve := s.routes
	if !s.caps.VhostVSOCK && transportNote(r.RelayTransport) == "" {
		// No guest of this node can reach a kernel-vsock listener without
		// /dev/vhost-vsock: open none (and close those of an earlier
		// reconcile); VSOCKRelayReady says VhostVSOCKMissing for the routes.
		serve = nil
	}
	if err := r.Relay.Update(serve); err != nil {
		s.relayErr = err
		ctrl.LoggerFrom(ctx).Error(err, "Failed to program the vsock relay")
	}
	if lim := r.Relay.Limits(); lim != (relay.Limits{}) {
		s.relayLimit = &fastpathv1alpha1.RelayLimits{
			MaxConns: clampInt32(lim.MaxTotalConns), MaxConnsPerCID: clampInt32(lim.MaxConnsPerCID), MaxConnsPerRoute: clampInt32(lim.DefaultMaxConns),
			MaxConnsPerNamespace: clampInt32(lim.MaxConnsPerNamespace), BufferBudgetBytes: lim.BufferBudget,
			IdleTimeout: metav1.Duration{Duration: max(lim.IdleTimeout, 0)}, HalfCloseTimeout: metav1.Duration{Duration: max(lim.HalfCloseTimeout, 0)},
		}
	}
	for _, l := range r.Relay.Listeners() {
		ls := fastpathv1alpha1.RelayListenerStatus{
			Port:       int64(l.Port),
			Attachment: l.Attachment.String(),
			Service:    l.Service,
			TargetCID:  int64(l.TargetCID),
			TargetPort: int64(l.TargetPort),
		}
		for _, c := range l.AllowedCIDs {
			ls.AllowedCIDs = append(ls.AllowedCIDs, int64(c))
		}
		s.listeners = append(s.listeners, ls)
	}
	if s.relayErr != nil {
		return r.retry(), nil
	}
	return ctrl.Result{}, nil
}

// ensureBridges ensures every desired bridge and describes each wanted,
// conflicting and no-longer-wanted bridge.
func (r *Reconciler) ensureBridges(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	s.desired, s.conflicts = DesiredBridges(s.networks, s.attachments)
	listed := map[string]bool{}
	for _, d := range s.desired {
		spec := bridge.Spec{Name: d.Name, Datapath: d.Datapath, MTU: int(d.MTU)}
		st, err := r.Bridges.Ensure(ctx, spec)
		bs := fastpathv1alpha1.BridgeStatus{
			Name: d.Name, Datapath: d.Datapath, MTU: int32(st.MTU),
			Network: d.Network, Ready: err == nil && st.Ready(spec), Attachments: d.Attachments, Message: st.Message,
		}
		switch {
		case err != nil:
			bs.Message = err.Error()
			s.bridgeErrs = append(s.bridgeErrs, err)
			log.Error(err, "Failed to ensure bridge", "bridge", d.Name, "datapath", d.Datapath)
		case !bs.Ready:
			err := fmt.Errorf("bridge %s is not ready: exists %t, up %t, MTU %d (want %d)", d.Name, st.Exists, st.Up, st.MTU, d.MTU)
			bs.Message = err.Error()
			s.bridgeErrs = append(s.bridgeErrs, err)
		}
		s.bridges = append(s.bridges, bs)
		listed[d.Name] = true
	}
	r.syncDevicePlugins(ctx, s)
	r.syncDHCP(ctx, s)
	for _, c := range s.conflicts {
		s.bridges = append(s.bridges, fastpathv1alpha1.BridgeStatus{Name: c.Name, Attachments: c.Attachments(), Message: c.Message()})
		listed[c.Name] = true
		log.Info("Bridge named by several FastPathNetworks; left unchanged", "bridge", c.Name, "networks", c.Networks)
	}
	managed, err := r.Bridges.Managed(ctx)
	if err != nil && !(errors.Is(err, bridge.ErrOVSUnreachable) && !wantsOVS(s.desired)) {
		log.Error(err, "Failed to list the agent's bridges")
	}
	leftover := false
	for _, m := range managed {
		if listed[m.Name] {
			continue
		}
		listed[m.Name] = true
		// A bridge of ours that no network names is removed once no port
		// uses it (the operator restarts the VMs still on it): left in
		// place, the NAD policy, which knows only the networks, would admit
		// a tenant's plain bridge NAD on it (issue 39, item 6).
		msg := ""
		switch {
		case m.Datapath == fastpathv1alpha1.DatapathMacvtap:
			msg = "no FastPathNetwork names this bridge any more; left in place (the agent cannot see the macvtaps on a lower device: delete it by hand once it is idle)"
		case len(m.Ports) > 0:
			leftover = true
			msg = fmt.Sprintf("no FastPathNetwork names this bridge any more; left in place while %d ports use it (%s), removed once none does", len(m.Ports), strings.Join(m.Ports, ", "))
		default:
			err := r.Bridges.RemoveUnused(ctx, m.Name, m.Datapath)
			if err == nil {
				log.Info("Removed a bridge no FastPathNetwork names and no port uses", "bridge", m.Name, "datapath", m.Datapath)
				continue
			}
			leftover = true
			msg = fmt.Sprintf("no FastPathNetwork names this bridge any more; not removed yet: %v", err)
		}
		s.bridges = append(s.bridges, fastpathv1alpha1.BridgeStatus{
			Name: m.Name, Datapath: m.Datapath, MTU: int32(m.MTU), Ready: m.Exists && m.Up, Message: msg,
		})
	}
	if len(s.bridgeErrs) > 0 {
		return r.retry(), nil
	}
	if leftover {
		// Ports go without an API event (the CNI plugin's DEL): look again.
		return ctrl.Result{RequeueAfter: leftoverBridgeRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// leftoverBridgeRecheck is how often the agent looks again at a bridge no
// network names that still has ports.
const leftoverBridgeRecheck = 30 * time.Second

// syncDevicePlugins runs the macvtap device plugin of every desired Macvtap
// bridge (healthy while the bridge is ready) and the sibling device plugin
// (r.SiblingDevicePlugin), and stops the others, when r.DevicePlugins is set. A resource kubelet has not registered is a bridge
// error: VMs on that network cannot get their /dev/tapN.
func (r *Reconciler) syncDevicePlugins(ctx context.Context, s *scope) {
	if r.DevicePlugins == nil {
		return
	}
	capacity := r.MacvtapCapacity
	if capacity <= 0 {
		capacity = deviceplugin.DefaultMacvtapCapacity
	}
	var want []deviceplugin.Want
	at := map[string]int{}
	for i, bs := range s.bridges {
		if bs.Datapath != fastpathv1alpha1.DatapathMacvtap {
			continue
		}
		res := deviceplugin.MacvtapResource(bs.Name, capacity)
		if r.MacvtapLaunchers != nil {
			res = r.MacvtapLaunchers.Resource(bs.Name, capacity)
		}
		want = append(want, deviceplugin.Want{Resource: res, Healthy: bs.Ready})
		at[res.Name] = i
	}
	if r.SiblingDevicePlugin != nil && r.Siblings != nil {
		want = append(want, deviceplugin.Want{Resource: *r.SiblingDevicePlugin, Healthy: true})
	}
	for name, err := range r.DevicePlugins.Sync(want) {
		if r.SiblingDevicePlugin != nil && name == r.SiblingDevicePlugin.Name {
			if err != nil {
				s.observed.siblingPluginErr = fmt.Errorf("device plugin %s: %w", name, err)
				ctrl.LoggerFrom(ctx).Error(err, "Device plugin not serving", "resource", name)
			}
			continue
		}
		bs := &s.bridges[at[name]]
		if err == nil {
			bs.ResourceName = name
			continue
		}
		err = fmt.Errorf("macvtap lower device %s: %w", bs.Name, err)
		bs.Message = strings.TrimPrefix(bs.Message+"; "+err.Error(), "; ")
		s.bridgeErrs = append(s.bridgeErrs, err)
		ctrl.LoggerFrom(ctx).Error(err, "Device plugin not serving", "resource", name)
	}
}

// syncDHCP runs the DHCPv4 responder of every ready desired bridge of
// datapath LinuxBridge, and stops the others, when r.DHCP is set. A bridge
// whose responder does not run is a bridge error: its guests get no
// address. OVS and Macvtap get none (not built).
func (r *Reconciler) syncDHCP(ctx context.Context, s *scope) {
	if r.DHCP == nil {
		return
	}
	var want []string
	at := map[string]int{}
	for i, bs := range s.bridges {
		if bs.Datapath == fastpathv1alpha1.DatapathLinuxBridge && bs.Ready {
			want = append(want, bs.Name)
			at[bs.Name] = i
		}
	}
	for name, err := range r.DHCP.Sync(want) {
		i, ok := at[name]
		if err == nil || !ok {
			continue
		}
		err = fmt.Errorf("DHCP responder on bridge %s: %w", name, err)
		bs := &s.bridges[i]
		bs.Message = strings.TrimPrefix(bs.Message+"; "+err.Error(), "; ")
		s.bridgeErrs = append(s.bridgeErrs, err)
		ctrl.LoggerFrom(ctx).Error(err, "DHCP responder not serving", "bridge", name)
	}
}

func wantsOVS(ds []DesiredBridge) bool { return wantsDatapath(ds, fastpathv1alpha1.DatapathOVS) }

// wantsDatapath reports whether one of ds is on datapath dp.
func wantsDatapath(ds []DesiredBridge, dp fastpathv1alpha1.Datapath) bool {
	for _, d := range ds {
		if d.Datapath == dp {
			return true
		}
	}
	return false
}

// retry is the result of a phase that failed in a way a retry may fix:
// requeue after RetryPeriod (DefaultRetryPeriod) rather than the resync.
func (r *Reconciler) retry() ctrl.Result {
	return ctrl.Result{RequeueAfter: r.period(r.RetryPeriod, DefaultRetryPeriod)}
}

func (r *Reconciler) period(p, def time.Duration) time.Duration {
	if p > 0 {
		return p
	}
	return def
}

func clampInt32(v int) int32 { return int32(min(v, math.MaxInt32)) }

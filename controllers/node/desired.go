package node

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vsock/relay"
)

// DesiredBridge is one node bridge the attachments want.
type DesiredBridge struct {
	// Name of the bridge.
	Name string
	// Datapath is LinuxBridge or OVS.
	Datapath fastpathv1alpha1.Datapath
	// MTU is the largest spec.network.mtu (bytes, after defaulting) among
	// Attachments.
	MTU int32
	// Attachments are the namespace/name of the attachments that want it, sorted.
	Attachments []string
}

// BridgeConflict is one bridge name wanted with more than one datapath.
type BridgeConflict struct {
	// Name of the bridge.
	Name string
	// ByDatapath maps each wanted datapath to the attachments (namespace/name,
	// sorted) that want it.
	ByDatapath map[fastpathv1alpha1.Datapath][]string
}

// Attachments returns every attachment involved, sorted.
func (c BridgeConflict) Attachments() []string {
	var out []string
	for _, as := range c.ByDatapath {
		out = append(out, as...)
	}
	slices.Sort(out)
	return out
}

// Message explains the conflict to an admin, naming the attachments, e.g.
// "bridge fastpath0 is wanted as LinuxBridge by apps/a and as OVS by apps/b:
// left unchanged until they agree (change spec.network.bridge or
// spec.network.datapath of one of them)".
func (c BridgeConflict) Message() string {
	dps := make([]string, 0, len(c.ByDatapath))
	for dp := range c.ByDatapath {
		dps = append(dps, string(dp))
	}
	slices.Sort(dps)
	parts := make([]string, len(dps))
	for i, dp := range dps {
		parts[i] = fmt.Sprintf("as %s by %s", dp, strings.Join(c.ByDatapath[fastpathv1alpha1.Datapath(dp)], ", "))
	}
	return fmt.Sprintf("bridge %s is wanted %s: left unchanged until they agree (change spec.network.bridge or spec.network.datapath of one of them)",
		c.Name, strings.Join(parts, " and "))
}

// DesiredBridges returns the bridges the attachments' spec.network asks for
// (after defaulting: LinuxBridge, fastpath0, 9000 bytes), one per bridge name
// with the largest MTU asked, and the names wanted with different datapaths,
// which are not in the first list. Both are sorted by name.
func DesiredBridges(atts []fastpathv1alpha1.FastPathAttachment) ([]DesiredBridge, []BridgeConflict) {
	type want struct {
		mtu  int32
		atts map[fastpathv1alpha1.Datapath][]string
	}
	byName := map[string]*want{}
	for i := range atts {
		a := &atts[i]
		if a.Spec.Network == nil {
			continue
		}
		n := fastpathv1alpha1.DefaultAttachmentSpec(a.Spec).Network
		w := byName[n.Bridge]
		if w == nil {
			w = &want{atts: map[fastpathv1alpha1.Datapath][]string{}}
			byName[n.Bridge] = w
		}
		w.mtu = max(w.mtu, *n.MTU)
		w.atts[n.Datapath] = append(w.atts[n.Datapath], key(a.Namespace, a.Name))
	}

	var bridges []DesiredBridge
	var conflicts []BridgeConflict
	for name, w := range byName {
		for dp := range w.atts {
			slices.Sort(w.atts[dp])
		}
		if len(w.atts) > 1 {
			conflicts = append(conflicts, BridgeConflict{Name: name, ByDatapath: w.atts})
			continue
		}
		for dp, as := range w.atts {
			bridges = append(bridges, DesiredBridge{Name: name, Datapath: dp, MTU: w.mtu, Attachments: as})
		}
	}
	slices.SortFunc(bridges, func(a, b DesiredBridge) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(conflicts, func(a, b BridgeConflict) int { return cmp.Compare(a.Name, b.Name) })
	return bridges, conflicts
}

// RelayRoutes returns the relay routes for node from the attachments'
// status.vsockServices, sorted by listen port: one per service whose node is
// node and which has a relay port and a target CID (the operator fills these
// in; services still waiting for them are skipped). Entries with values
// outside the vsock ranges (ports and CIDs are uint32) are skipped and
// explained in problems.
func RelayRoutes(atts []fastpathv1alpha1.FastPathAttachment, node string) (routes []relay.Route, problems []string) {
	for i := range atts {
		a := &atts[i]
		for _, s := range a.Status.VSOCKServices {
			if s.Node != node || s.RelayPort == 0 || s.TargetCID == nil {
				continue
			}
			rt := relay.Route{
				Attachment: types.NamespacedName{Namespace: a.Namespace, Name: a.Name},
				Service:    s.Name,
			}
			var bad []string
			rt.ListenPort, bad = toUint32("relayPort", s.RelayPort, bad)
			rt.TargetPort, bad = toUint32("port", s.Port, bad)
			rt.TargetCID, bad = toUint32("targetCID", *s.TargetCID, bad)
			for _, c := range s.AllowedCIDs {
				var cid uint32
				cid, bad = toUint32("allowedCIDs", c, bad)
				rt.AllowedCIDs = append(rt.AllowedCIDs, cid)
			}
			if len(bad) > 0 {
				problems = append(problems, fmt.Sprintf("attachment %s service %s: %s", key(a.Namespace, a.Name), s.Name, strings.Join(bad, ", ")))
				continue
			}
			slices.Sort(rt.AllowedCIDs)
			rt.AllowedCIDs = slices.Compact(rt.AllowedCIDs)
			routes = append(routes, rt)
		}
	}
	slices.SortFunc(routes, func(a, b relay.Route) int { return cmp.Compare(a.ListenPort, b.ListenPort) })
	return routes, problems
}

func toUint32(field string, v int64, bad []string) (uint32, []string) {
	if v < 0 || v > math.MaxUint32 {
		return 0, append(bad, fmt.Sprintf("%s %d is not a uint32", field, v))
	}
	return uint32(v), bad
}

func key(namespace, name string) string { return namespace + "/" + name }

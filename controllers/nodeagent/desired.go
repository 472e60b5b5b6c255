package nodeagent

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

// DesiredBridge is one node bridge a FastPathNetwork asks for.
type DesiredBridge struct {
	// Name of the bridge (of the macvtap lower device on datapath Macvtap).
	Name string
	// Datapath is LinuxBridge, OVS or Macvtap.
	Datapath fastpathv1alpha1.Datapath
	// MTU is the network's largest allowed MTU (spec.mtu.max after
	// defaulting), bytes: the CNI plugin refuses a pod MTU above the bridge's.
	MTU int32
	// Network is the FastPathNetwork that owns the bridge.
	Network string
	// Attachments are the namespace/name of the attachments with spec.network
	// on that network (by spec.networkRef, or the default network), sorted.
	Attachments []string
}

// BridgeConflict is one bridge name claimed by more than one FastPathNetwork.
type BridgeConflict struct {
	// Name of the bridge.
	Name string
	// Networks are the FastPathNetworks naming it, sorted.
	Networks []string
	// ByNetwork maps each of Networks to the attachments (namespace/name,
	// sorted) on it.
	ByNetwork map[string][]string
}

// Attachments returns every attachment involved, sorted.
func (c BridgeConflict) Attachments() []string {
	var out []string
	for _, as := range c.ByNetwork {
		out = append(out, as...)
	}
	slices.Sort(out)
	return out
}

// Message explains the conflict to an admin, e.g. "bridge fastpath0 is named
// by FastPathNetworks a, b: left unchanged until only one names it (two
// networks on one bridge would join their tenants in one L2 segment)".
func (c BridgeConflict) Message() string {
	return fmt.Sprintf("bridge %s is named by FastPathNetworks %s: left unchanged until only one names it (two networks on one bridge would join their tenants in one L2 segment)",
		c.Name, strings.Join(c.Networks, ", "))
}

// DesiredBridges returns the bridges the FastPathNetworks ask for (after
// defaulting, DefaultNetworkSpec), one per network, with the attachments on
// each; and the bridge names more than one network claims, which are not in
// the first list: the agent never lets two networks share an L2 segment.
// Both are sorted by name.
func DesiredBridges(nets []fastpathv1alpha1.FastPathNetwork, atts []fastpathv1alpha1.FastPathAttachment) ([]DesiredBridge, []BridgeConflict) {
	var defaults []string
	byNet := map[string][]string{}
	byBridge := map[string][]*fastpathv1alpha1.FastPathNetwork{}
	for i := range nets {
		n := &nets[i]
		if n.Annotations[fastpathv1alpha1.DefaultNetworkAnnotation] == "true" {
			defaults = append(defaults, n.Name)
		}
		byBridge[n.Spec.Bridge] = append(byBridge[n.Spec.Bridge], n)
	}
	for i := range atts {
		a := &atts[i]
		if a.Spec.Network == nil {
			continue
		}
		name := fastpathv1alpha1.NetworkRefName(&a.Spec)
		if name == "" && len(defaults) == 1 {
			name = defaults[0] // with none or several, the operator refuses it
		}
		byNet[name] = append(byNet[name], key(a.Namespace, a.Name))
	}
	for _, as := range byNet {
		slices.Sort(as)
	}

	var bridges []DesiredBridge
	var conflicts []BridgeConflict
	for name, ns := range byBridge {
		if len(ns) > 1 {
			c := BridgeConflict{Name: name, ByNetwork: map[string][]string{}}
			for _, n := range ns {
				c.Networks = append(c.Networks, n.Name)
				c.ByNetwork[n.Name] = byNet[n.Name]
			}
			slices.Sort(c.Networks)
			conflicts = append(conflicts, c)
			continue
		}
		spec := fastpathv1alpha1.DefaultNetworkSpec(ns[0].Spec)
		bridges = append(bridges, DesiredBridge{Name: name, Datapath: spec.Datapath, MTU: *spec.MTU.Max,
			Network: ns[0].Name, Attachments: byNet[ns[0].Name]})
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

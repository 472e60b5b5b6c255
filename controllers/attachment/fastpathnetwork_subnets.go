package attachment

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// One address per port on a network (issue 39, item 4): a FastPathNetwork is
// one L2 segment on a node, whatever the namespaces of its attachments, and
// attachments with overlapping subnets on it hand out one address to two
// ports (by accident, or on purpose with rangeStart=rangeEnd=<victim>).
// Among the attachments on a network whose subnets overlap, the first keeps
// its subnet and the others are refused (SubnetConflict); first is one that
// already holds the subnet it asks for (status.subnet on status.network),
// then the oldest (creationTimestamp, then name, then namespace). So an
// attachment that changes its subnet onto one another attachment holds is
// refused, however old it is, and the holder keeps it.

// checkNetworkSpec checks what the CRD cannot in a resolved spec.network and
// returns its subnet: a CIDR, outside every pod network, rangeStart not after
// rangeEnd, tso only with txChecksum. The error names the field.
func (r *Reconciler) checkNetworkSpec(n *v1alpha1.NetworkSpec) (netip.Prefix, error) {
	subnet, err := netip.ParsePrefix(n.IPAM.Subnet)
	if err != nil {
		return subnet, fmt.Errorf("spec.network.ipam.subnet %q is not a CIDR: %v", n.IPAM.Subnet, err)
	}
	subnet = subnet.Masked()
	for _, pod := range r.PodNetworkCIDRs {
		if subnet.Overlaps(pod) {
			return subnet, fmt.Errorf("spec.network.ipam.subnet %s overlaps the pod network %s (--pod-network-cidr): choose a range the cluster does not route", n.IPAM.Subnet, pod)
		}
	}
	if n.IPAM.RangeStart != "" && n.IPAM.RangeEnd != "" {
		start, err1 := netip.ParseAddr(n.IPAM.RangeStart)
		end, err2 := netip.ParseAddr(n.IPAM.RangeEnd)
		if err1 == nil && err2 == nil && start.Compare(end) > 0 {
			return subnet, fmt.Errorf("spec.network.ipam.rangeStart %s is after spec.network.ipam.rangeEnd %s", start, end)
		}
	}
	if n.Offloads.TSO.On() && !n.Offloads.TXChecksum.On() {
		return subnet, fmt.Errorf("spec.network.offloads.tso On requires spec.network.offloads.txChecksum On: the kernel turns TSO off without TX checksum offload")
	}
	return subnet, nil
}

// subnetHolder is an attachment on a network with the subnet it asks for
// and whether it already holds that subnet there.
type subnetHolder struct {
	att    *v1alpha1.FastPathAttachment
	subnet netip.Prefix
	held   bool
}

// holds reports whether att holds subnet on network: its status.subnet,
// set when it last passed checkSubnet there, is that subnet.
func holds(att *v1alpha1.FastPathAttachment, network string, subnet netip.Prefix) bool {
	p, err := netip.ParsePrefix(att.Status.Subnet)
	return err == nil && att.Status.Network == network && p.Masked() == subnet
}

// first orders holders for the subnet rule: one that holds its subnet,
// then by before.
func first(a, b subnetHolder) int {
	if a.held != b.held {
		if a.held {
			return -1
		}
		return 1
	}
	return before(a.att, b.att)
}

// before orders attachments by age: oldest creationTimestamp, then name,
// then namespace.
func before(a, b *v1alpha1.FastPathAttachment) int {
	if c := a.CreationTimestamp.Time.Compare(b.CreationTimestamp.Time); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Namespace, b.Namespace))
}

// checkSubnet refuses s's subnet when it overlaps the subnet of an
// attachment that comes first on the same FastPathNetwork (first) and is
// not itself refused for overlapping an earlier one; it records the subnet
// s holds in s's status.subnet, or clears it on a refusal. Attachments that the network does
// not admit, or whose spec it refuses, hold no subnet. The refusal is
// NetworkAttachmentReady=False/SubnetConflict naming the other attachment
// (namespace/name) and both subnets, the NAD is deleted as for any refusal,
// and the returned error is terminal: the watch on attachments whose subnets
// overlap brings s back when the other changes or goes.
func (r *Reconciler) checkSubnet(ctx context.Context, s *scope, subnet netip.Prefix) error {
	net := &v1alpha1.FastPathNetwork{}
	if err := r.Cache.Get(ctx, types.NamespacedName{Name: s.network}, net); err != nil {
		return fmt.Errorf("failed to get FastPathNetwork %s: %w", s.network, err)
	}
	self := subnetHolder{att: s.att, subnet: subnet, held: holds(s.att, net.Name, subnet)}
	defaultNetwork, defaultKnown := "", false
	nsLabels := map[string]map[string]string{}
	var holders []subnetHolder
	all := r.attachmentsIn(ctx, "")
	for i := range all {
		a := &all[i]
		if a.Spec.Network == nil || (a.Namespace == s.att.Namespace && a.Name == s.att.Name) {
			continue
		}
		name := v1alpha1.NetworkRefName(&a.Spec)
		if name == "" {
			if !defaultKnown {
				if d, err := r.networkOf(ctx, &v1alpha1.FastPathAttachmentSpec{}); err == nil {
					defaultNetwork = d.Name
				}
				defaultKnown = true
			}
			name = defaultNetwork
		}
		if name != net.Name {
			continue
		}
		labels, ok := nsLabels[a.Namespace]
		if !ok {
			ns := &corev1.Namespace{}
			if err := r.Cache.Get(ctx, types.NamespacedName{Name: a.Namespace}, ns); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("failed to get Namespace %s: %w", a.Namespace, err)
			}
			labels = ns.Labels
			nsLabels[a.Namespace] = labels
		}
		resolved, err := v1alpha1.ResolveNetwork(v1alpha1.WithTunedDefaults(a.Spec, net, a.CreationTimestamp), labels, net)
		if err != nil {
			continue
		}
		other, err := r.checkNetworkSpec(resolved.Network)
		if err != nil {
			continue
		}
		// Only attachments that come first can hold a subnet against s.
		h := subnetHolder{att: a, subnet: other, held: holds(a, net.Name, other)}
		if first(h, self) > 0 {
			continue
		}
		// attachmentsIn shares the cache's objects: keep a copy.
		h.att = a.DeepCopy()
		holders = append(holders, h)
	}
	slices.SortFunc(holders, first)
	var kept []subnetHolder
	for _, h := range holders {
		if !slices.ContainsFunc(kept, func(k subnetHolder) bool { return k.subnet.Overlaps(h.subnet) }) {
			kept = append(kept, h)
		}
	}
	i := slices.IndexFunc(kept, func(k subnetHolder) bool { return k.subnet.Overlaps(subnet) })
	if i < 0 {
		s.att.Status.Subnet = subnet.String()
		return nil
	}
	s.att.Status.Subnet = ""
	holder := kept[i]
	why := "which came first on"
	if holder.held {
		why = "which holds it on"
	}
	msg := fmt.Sprintf("spec.network.ipam.subnet %s overlaps subnet %s of FastPathAttachment %s/%s, %s FastPathNetwork %s "+
		"(one L2 segment for every namespace it admits: overlapping subnets hand out one address to two ports); choose a subnet that overlaps no other attachment's on the network",
		s.spec.Network.IPAM.Subnet, holder.att.Spec.Network.IPAM.Subnet, holder.att.Namespace, holder.att.Name, why, net.Name)
	if err := r.deleteOwnedNAD(ctx, s); err != nil {
		return err
	}
	s.setCondition(v1alpha1.NetworkAttachmentReadyCondition, metav1.ConditionFalse, v1alpha1.ReasonSubnetConflict, msg)
	return s.invalidSpec("%s", msg)
}

// overlappingAttachments maps an attachment to every other attachment whose
// subnet overlaps its own, and to those overlapping them in turn: whether one
// of them keeps its subnet can depend on any attachment of that chain
// (checkSubnet). Attachments on other networks are included too; their
// reconcile finds nothing to change.
func (r *Reconciler) overlappingAttachments(ctx context.Context, obj client.Object) []ctrl.Request {
	a, ok := obj.(*v1alpha1.FastPathAttachment)
	if !ok || a.Spec.Network == nil {
		return nil
	}
	start, err := netip.ParsePrefix(a.Spec.Network.IPAM.Subnet)
	if err != nil {
		return nil
	}
	all := r.attachmentsIn(ctx, "")
	subnets := make([]netip.Prefix, len(all))
	for i := range all {
		if all[i].Spec.Network != nil {
			subnets[i], _ = netip.ParsePrefix(all[i].Spec.Network.IPAM.Subnet)
		}
	}
	seen := make([]bool, len(all))
	var out []ctrl.Request
	for frontier := []netip.Prefix{start}; len(frontier) > 0; {
		next := frontier[len(frontier)-1]
		frontier = frontier[:len(frontier)-1]
		for i := range all {
			if seen[i] || !subnets[i].IsValid() || !subnets[i].Overlaps(next) {
				continue
			}
			seen[i] = true
			if all[i].Namespace == a.Namespace && all[i].Name == a.Name {
				continue
			}
			out = append(out, request(&all[i]))
			frontier = append(frontier, subnets[i])
		}
	}
	return out
}

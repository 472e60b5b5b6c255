package attachment

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// moveCandidate is a node as a group move sees it.
type moveCandidate struct {
	node *corev1.Node
	// fastPath is "" when the node's FastPathNode is Ready and has the
	// attachment's network bridge Ready; otherwise why not.
	fastPath string
	// used are the requests of the pods already on the node (not
	// terminated), summed per resource.
	used corev1.ResourceList
}

// moveGroup is what must fit on the target: the placement constraints of
// the moving VMIs (as KubeVirt copies them to the migration target pod) and
// the summed requests of their virt-launcher pods.
type moveGroup struct {
	from        string
	constraints []*corev1.Pod
	need        corev1.ResourceList
}

// chooseTarget picks the node a group moves to: not from, Ready, not
// cordoned, no NoSchedule or NoExecute taint the VMs do not tolerate,
// matching every VM's node selector and required node affinity, its
// FastPathNode Ready with the network's bridge, and room for the group's
// requests in its allocatable resources (cpu, memory, and any other
// resource requested). Of the nodes that fit it takes the one with the most
// allocatable memory left, then the first by name. It returns "" when none
// fits, and for each node it passed over why, in name order.
func chooseTarget(g moveGroup, candidates []moveCandidate) (string, []string) {
	cands := slices.Clone(candidates)
	slices.SortFunc(cands, func(a, b moveCandidate) int { return strings.Compare(a.node.Name, b.node.Name) })
	var best string
	var bestFree resource.Quantity
	var why []string
	for _, c := range cands {
		n := c.node
		if n.Name == g.from {
			continue
		}
		if reason := unfit(g, c); reason != "" {
			why = append(why, n.Name+": "+reason)
			continue
		}
		free := n.Status.Allocatable.Memory().DeepCopy()
		if u, ok := c.used[corev1.ResourceMemory]; ok {
			free.Sub(u)
		}
		if best == "" || free.Cmp(bestFree) > 0 {
			best, bestFree = n.Name, free
		}
	}
	return best, why
}

// unfit says why the group cannot move to candidate c, or "".
func unfit(g moveGroup, c moveCandidate) string {
	n := c.node
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	ready := false
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			ready = cond.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "Node not Ready"
	}
	for _, p := range g.constraints {
		if taint, ok := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, p.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}); ok {
			return fmt.Sprintf("taint %s=%s:%s not tolerated by VM %s", taint.Key, taint.Value, taint.Effect, p.Name)
		}
		if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); err != nil || !ok {
			return fmt.Sprintf("VM %s's node selector or required node affinity does not match", p.Name)
		}
	}
	if c.fastPath != "" {
		return c.fastPath
	}
	var short []string
	for _, r := range slices.Sorted(maps.Keys(g.need)) {
		want := g.need[r]
		alloc, ok := n.Status.Allocatable[r]
		if !ok {
			short = append(short, fmt.Sprintf("no allocatable %s (%s needed)", r, want.String()))
			continue
		}
		free := alloc.DeepCopy()
		if u, ok := c.used[r]; ok {
			free.Sub(u)
		}
		if free.Cmp(want) < 0 {
			short = append(short, fmt.Sprintf("%s free of %s, %s needed", quantityString(free), r, want.String()))
		}
	}
	if len(short) > 0 {
		return "no room: " + strings.Join(short, ", ")
	}
	return ""
}

func quantityString(q resource.Quantity) string {
	if q.Sign() < 0 {
		return "none"
	}
	return q.String()
}

// podRequests sums the requests of a pod's containers (and the largest of
// its init containers', which run before them, per resource), as the
// scheduler counts them; overhead is added.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		addResources(out, c.Resources.Requests)
	}
	for _, c := range p.Spec.InitContainers {
		for r, q := range c.Resources.Requests {
			if cur, ok := out[r]; !ok || cur.Cmp(q) < 0 {
				out[r] = q.DeepCopy()
			}
		}
	}
	addResources(out, p.Spec.Overhead)
	return out
}

func addResources(into, add corev1.ResourceList) {
	for r, q := range add {
		cur := into[r]
		cur.Add(q)
		into[r] = cur
	}
}

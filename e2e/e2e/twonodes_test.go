package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/wiring"
)

// TwoNodesNeeded is why the two-node specs do not run on one node.
const TwoNodesNeeded = "the cluster has fewer than two schedulable KubeVirt nodes (make e2e-cluster NODES=2 runs these)"

// The specs of a multi-node cluster: where "same node" means something.
// Each step starts its VMs and removes them before the next, so that no
// more than two TCG guests share the two cores.
var _ = Describe("Two nodes", Ordered, func() {
	var (
		nodes   []string
		network *fastpathv1alpha1.FastPathNetwork
	)
	c := func() client.Client { return env.Client() }
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	vmi := func(g Gomega, ctx SpecContext, name string) *kubevirtv1.VirtualMachineInstance {
		v := &kubevirtv1.VirtualMachineInstance{}
		g.Expect(c().Get(ctx, key(name), v)).To(Succeed())
		return v
	}
	attachment := func(g Gomega, ctx SpecContext, name string) *fastpathv1alpha1.FastPathAttachment {
		a := &fastpathv1alpha1.FastPathAttachment{}
		g.Expect(c().Get(ctx, key(name), a)).To(Succeed())
		return a
	}
	colocated := func(g Gomega, ctx SpecContext, name string) *metav1.Condition {
		cond := apimeta.FindStatusCondition(attachment(g, ctx, name).Status.Conditions, fastpathv1alpha1.ColocatedCondition)
		g.Expect(cond).NotTo(BeNil())
		return cond
	}
	migrate := func(ctx SpecContext, name string) *kubevirtv1.VirtualMachineInstanceMigration {
		GinkgoHelper()
		m := &kubevirtv1.VirtualMachineInstanceMigration{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: name + "-"},
			Spec:       kubevirtv1.VirtualMachineInstanceMigrationSpec{VMIName: name},
		}
		Expect(c().Create(ctx, m)).To(Succeed())
		return m
	}

	BeforeAll(func(ctx SpecContext) {
		if env.Emulated() || !env.KubeVirt() {
			notRun(NoKubeVirt + "; or the local stack, which has one emulated node")
		}
		l := &corev1.NodeList{}
		Expect(c().List(ctx, l, client.MatchingLabels{kubevirtv1.NodeSchedulable: "true"})).To(Succeed())
		for _, n := range l.Items {
			nodes = append(nodes, n.Name)
		}
		slices.Sort(nodes)
		if len(nodes) < 2 {
			notRun(TwoNodesNeeded)
		}
		// The suite's Secrets, which the Fastpath container may have made
		// already (containers run in random order).
		for _, s := range objs.Secrets {
			s := s.DeepCopy()
			s.ResourceVersion, s.UID = "", ""
			if err := c().Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
				Expect(err).NotTo(HaveOccurred())
			}
		}
		network = objs.Network.DeepCopy()
		network.ObjectMeta = metav1.ObjectMeta{Name: "e2e-2n-" + ns}
		network.Spec.Bridge = "fp2n0"
		// A moved VM keeps the address its lease on the old node gave it,
		// while host-local IPAM on the new node may give its new launcher
		// pod another one: port security would then drop the guest's
		// packets. Off here, so the specs see the fast path itself after a
		// move; the addresses are reported (docs/design.md §3.2).
		network.Spec.PortSecurity = fastpathv1alpha1.PortSecurityDisabled
		Expect(c().Create(ctx, network)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(c().Delete(ctx, network))).To(Succeed()) })
	}, NodeTimeout(2*time.Minute))

	It("lists a Ready FastPathNode per node, each with its own bridge of the network", func(ctx SpecContext) {
		eventually(ctx, func(g Gomega) {
			for _, n := range nodes {
				fpn := &fastpathv1alpha1.FastPathNode{}
				g.Expect(c().Get(ctx, types.NamespacedName{Name: n}, fpn)).To(Succeed())
				cond := apimeta.FindStatusCondition(fpn.Status.Conditions, fastpathv1alpha1.ReadyCondition)
				g.Expect(cond).NotTo(BeNil(), "FastPathNode %s", n)
				g.Expect(cond.Status).To(Equal(metav1.ConditionTrue), "FastPathNode %s: %s: %s", n, cond.Reason, cond.Message)
				g.Expect(fpn.Status.Bridges).To(ContainElement(And(HaveField("Name", network.Spec.Bridge), HaveField("Ready", BeTrue()))), "FastPathNode %s", n)
			}
		}, 2*time.Minute).Should(Succeed())
		AddReportEntry("FastPathNodes", strings.Join(nodes, ", "))
	})

	It("live-migrates a VM without Fastpath between the nodes (VirtualMachineInstanceMigration Succeeded)", func(ctx SpecContext) {
		// No disk at all: the guest boots from its kernel-boot image alone.
		vm := newVM("plain-2n", "plain-2n", "")
		vm.Spec.Template.Spec.AccessCredentials = nil
		vm.Spec.Template.Spec.Volumes = nil
		vm.Spec.Template.Spec.Domain.Devices.Disks = nil
		Expect(c().Create(ctx, vm)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { removeVMs(ctx, nil, vm.Name) }, NodeTimeout(4*time.Minute))
		setRunStrategy(ctx, vm.Name, kubevirtv1.RunStrategyAlways)
		var from string
		eventually(ctx, func(g Gomega) {
			v := vmi(g, ctx, vm.Name)
			g.Expect(v.Status.Phase).To(Equal(kubevirtv1.Running))
			g.Expect(v.Status.Conditions).To(ContainElement(And(HaveField("Type", kubevirtv1.VirtualMachineInstanceIsMigratable), HaveField("Status", corev1.ConditionTrue))))
			from = v.Status.NodeName
		}, 5*time.Minute).Should(Succeed())
		start := time.Now()
		m := migrate(ctx, vm.Name)
		eventually(ctx, func(g Gomega) {
			got := &kubevirtv1.VirtualMachineInstanceMigration{}
			g.Expect(c().Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			if got.Status.Phase == kubevirtv1.MigrationFailed {
				StopTrying("migration failed: " + migrationFailure(ctx, got)).Now()
			}
			g.Expect(got.Status.Phase).To(Equal(kubevirtv1.MigrationSucceeded))
		}, 4*time.Minute).Should(Succeed())
		took := time.Since(start)
		v := vmi(Default, ctx, vm.Name)
		Expect(v.Status.NodeName).NotTo(Equal(from), "the VMI moved")
		Expect(v.Status.Phase).To(Equal(kubevirtv1.Running))
		AddReportEntry("live migration", fmt.Sprintf("VM %s from %s to %s in %.1fs (TCG guest, 256 MiB)", vm.Name, from, v.Status.NodeName, took.Seconds()))
		fmt.Fprintf(GinkgoWriter, "live migration: VM %s from %s to %s in %.1fs\n", vm.Name, from, v.Status.NodeName, took.Seconds())
	}, SpecTimeout(12*time.Minute))

	// fastIP is the fast-path address of a VMI of attachment a, "" while
	// KubeVirt reports none.
	fastIP := func(v *kubevirtv1.VirtualMachineInstance, a string) string {
		for _, i := range v.Status.Interfaces {
			if i.Name == fastpathv1alpha1.NetworkName(a) {
				return i.IP
			}
		}
		return ""
	}
	// guestFastIP is the address VM name's guest has in subnet (read in the
	// guest: after a move the VMI reports what the new node's IPAM gave).
	guestFastIP := func(ctx SpecContext, name, subnet string) (string, error) {
		prefix, err := netip.ParsePrefix(subnet)
		if err != nil {
			return "", err
		}
		out, err := env.GuestExec(ctx, key(name), "", "ip -4 -o addr show")
		if err != nil {
			return "", fmt.Errorf("%w: %s", err, out)
		}
		for _, f := range strings.Fields(out) {
			if p, perr := netip.ParsePrefix(f); perr == nil && prefix.Contains(p.Addr()) {
				return p.Addr().String(), nil
			}
		}
		return "", fmt.Errorf("VM %s has no address in %s: %s", name, subnet, out)
	}
	// pingFast pings, from VM from, VM to's fast-path address (the guest's
	// own) with the largest don't-fragment packet the attachment's MTU carries.
	pingFast := func(ctx SpecContext, a *fastpathv1alpha1.FastPathAttachment, from, to string) (string, error) {
		dst, err := guestFastIP(ctx, to, a.Spec.Network.IPAM.Subnet)
		if err != nil {
			return "", err
		}
		mtu := attachment(Default, ctx, a.Name).Status.MTU
		return env.GuestExec(ctx, key(from), "", fmt.Sprintf("/usr/bin/ping -M do -s %d -c 3 -W 2 %s", mtu-28, dst))
	}
	// together waits until the move of a's VMs ended with both on one node
	// other than from, and returns it.
	together := func(ctx SpecContext, a *fastpathv1alpha1.FastPathAttachment, from string, names ...string) string {
		GinkgoHelper()
		var to string
		eventually(ctx, func(g Gomega) {
			got := attachment(g, ctx, a.Name)
			cond := apimeta.FindStatusCondition(got.Status.Conditions, fastpathv1alpha1.MovedTogetherCondition)
			g.Expect(cond).NotTo(BeNil())
			if cond.Reason == fastpathv1alpha1.ReasonNoTargetNode || cond.Reason == fastpathv1alpha1.ReasonMoveFailed {
				StopTrying(cond.Reason + ": " + cond.Message).Now()
			}
			g.Expect(cond.Reason).To(Equal(fastpathv1alpha1.ReasonMoved), cond.Message)
			g.Expect(got.Status.Move).To(BeNil())
			for _, n := range names {
				v := vmi(g, ctx, n)
				g.Expect(v.Status.Phase).To(Equal(kubevirtv1.Running))
				g.Expect(v.Status.NodeName).NotTo(Equal(from), "VM %s", n)
				if to == "" {
					to = v.Status.NodeName
				}
				g.Expect(v.Status.NodeName).To(Equal(to), "VM %s with its group", n)
			}
		}, 10*time.Minute).Should(Succeed())
		return to
	}
	// fastPathBack pings until the fast path answers again and returns when.
	fastPathBack := func(ctx SpecContext, a *fastpathv1alpha1.FastPathAttachment, from, to string) time.Time {
		GinkgoHelper()
		var out string
		eventually(ctx, func(g Gomega) {
			var err error
			out, err = pingFast(ctx, a, from, to)
			g.Expect(err).NotTo(HaveOccurred(), out)
			g.Expect(out).To(ContainSubstring("3 received"))
		}, 3*time.Minute).Should(Succeed())
		return time.Now()
	}

	It("drains a node: the VMs of a MigrateTogether attachment arrive together on the other node, the fast path works again, the VM specs hold only the recorded wiring", func(ctx SpecContext) {
		a := newAttachment("drain-2n", "drain-2n", network.Name, "10.251.0.0/24", fastpathv1alpha1.PlacementRequired)
		vms := []*kubevirtv1.VirtualMachine{newVM("drain-2n-0", "drain-2n", ""), newVM("drain-2n-1", "drain-2n", "")}
		DeferCleanup(func(ctx SpecContext) { removeVMs(ctx, a, vms[0].Name, vms[1].Name) }, NodeTimeout(4*time.Minute))
		startWired(ctx, a, vms...)
		Expect(attachment(Default, ctx, a.Name).Spec.Eviction).To(BeEmpty(), "the default: MigrateTogether for placement Required")
		from := vmi(Default, ctx, vms[0].Name).Status.NodeName
		Expect(vmi(Default, ctx, vms[1].Name).Status.NodeName).To(Equal(from), "placement Required")
		for _, vm := range vms {
			v := vmi(Default, ctx, vm.Name)
			Expect(v.Spec.EvictionStrategy).To(HaveValue(Equal(kubevirtv1.EvictionStrategyExternal)), "VMI %s", vm.Name)
		}
		fastPathBack(ctx, a, vms[0].Name, vms[1].Name)

		By("kubectl drain " + from + " (its virt-launcher pods of this attachment; the cluster's own pods stay)")
		DeferCleanup(func(ctx SpecContext) {
			out, err := exec.CommandContext(ctx, "kubectl", "uncordon", from).CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
		})
		start := time.Now()
		out, err := exec.CommandContext(ctx, "kubectl", "drain", from, "--ignore-daemonsets", "--delete-emptydir-data",
			"--pod-selector", "app=drain-2n", "--timeout=20m").CombinedOutput()
		drained := time.Since(start)
		Expect(err).NotTo(HaveOccurred(), "kubectl drain:\n%s", out)
		to := together(ctx, a, from, vms[0].Name, vms[1].Name)
		back := fastPathBack(ctx, a, vms[0].Name, vms[1].Name)
		var addrs []string
		for _, vm := range vms {
			inGuest, err := guestFastIP(ctx, vm.Name, a.Spec.Network.IPAM.Subnet)
			Expect(err).NotTo(HaveOccurred())
			addrs = append(addrs, fmt.Sprintf("%s: guest %s, VMI %s", vm.Name, inGuest, fastIP(vmi(Default, ctx, vm.Name), a.Name)))
		}
		got := attachment(Default, ctx, a.Name)
		moved := apimeta.FindStatusCondition(got.Status.Conditions, fastpathv1alpha1.MovedTogetherCondition)
		Expect(moved.Message).To(ContainSubstring("from node " + from + " to node " + to))
		Expect(colocated(Default, ctx, a.Name).Status).To(Equal(metav1.ConditionTrue))

		By("the VM specs: the user's template plus exactly the recorded wiring")
		for _, vm := range vms {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(kubevirtv1.VirtualMachineGroupVersionKind)
			Expect(c().Get(ctx, key(vm.Name), u)).To(Succeed())
			d := wiring.ForAttachment(got)
			Expect(wiring.IsWired(u.Object, d)).To(BeTrue(), "VM %s carries the attachment's wiring, the placement term back", vm.Name)
			_, err := wiring.Unwire(u.Object)
			Expect(err).NotTo(HaveOccurred())
			unwired, _, err := unstructured.NestedMap(u.Object, "spec", "template", "spec")
			Expect(err).NotTo(HaveOccurred())
			_, hasAffinity := unwired["affinity"]
			_, hasEviction := unwired["evictionStrategy"]
			_, hasSelector := unwired["nodeSelector"]
			Expect([]bool{hasAffinity, hasEviction, hasSelector}).To(Equal([]bool{false, false, false}),
				"VM %s: nothing of the move is left once the recorded wiring is taken away", vm.Name)
		}
		report := fmt.Sprintf("kubectl drain %s exited 0 after %.1fs; VMs %s, %s moved together to %s (%s); fast path answering again %.1fs after the drain started (EMULATED nodes: namespaces of one host; TCG guests, 256 MiB, MTU %d and default offloads both ends, port security off); addresses after the move: %s",
			from, drained.Seconds(), vms[0].Name, vms[1].Name, to, moved.Message, back.Sub(start).Seconds(), got.Status.MTU, strings.Join(addrs, "; "))
		AddReportEntry("drain", report)
		fmt.Fprintln(GinkgoWriter, "drain: "+report)

		By("a user's VirtualMachineInstanceMigration of one VM moves the group back")
		out, err = exec.CommandContext(ctx, "kubectl", "uncordon", from).CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		start = time.Now()
		m := migrate(ctx, vms[1].Name)
		eventually(ctx, func(g Gomega) {
			err := c().Get(ctx, client.ObjectKeyFromObject(m), &kubevirtv1.VirtualMachineInstanceMigration{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the user's migration is replaced by the group's move")
		}, time.Minute).Should(Succeed())
		back2 := together(ctx, a, to, vms[0].Name, vms[1].Name)
		Expect(back2).To(Equal(from))
		fastPathBack(ctx, a, vms[0].Name, vms[1].Name)
		report = fmt.Sprintf("a migration of %s alone became a move of both to %s in %.1fs, fast path answering again",
			vms[1].Name, back2, time.Since(start).Seconds())
		AddReportEntry("user migration", report)
		fmt.Fprintln(GinkgoWriter, "user migration: "+report)
	}, SpecTimeout(30*time.Minute))

	It("reports the VMs of a None attachment pinned apart Colocated=False with both nodes, and a benchmark between them fails at once with VMsApart", func(ctx SpecContext) {
		a := newAttachment("none-2n", "none-2n", network.Name, "10.251.1.0/24", fastpathv1alpha1.PlacementNone)
		vms := []*kubevirtv1.VirtualMachine{newVM("none-2n-0", "none-2n", nodes[0]), newVM("none-2n-1", "none-2n", nodes[1])}
		DeferCleanup(func(ctx SpecContext) { removeVMs(ctx, a, vms[0].Name, vms[1].Name) }, NodeTimeout(4*time.Minute))
		startWired(ctx, a, vms...)
		eventually(ctx, func(g Gomega) {
			cond := colocated(g, ctx, a.Name)
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(fastpathv1alpha1.ReasonNotColocated))
			g.Expect(cond.Message).To(And(ContainSubstring(vms[0].Name+" on "+nodes[0]), ContainSubstring(vms[1].Name+" on "+nodes[1])))
		}, time.Minute).Should(Succeed())

		b := objs.Benchmark.DeepCopy()
		b.ObjectMeta = metav1.ObjectMeta{Name: "apart-2n", Namespace: ns}
		b.Spec.AttachmentRef.Name = a.Name
		b.Spec.Client.VM, b.Spec.Server.VM = vms[1].Name, vms[0].Name
		b.Spec.AdditionalPairs = nil
		Expect(c().Create(ctx, b)).To(Succeed())
		start := time.Now()
		eventually(ctx, func(g Gomega) {
			got := &fastpathv1alpha1.FastPathBenchmark{}
			g.Expect(c().Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
			g.Expect(got.Status.Phase).To(Equal(fastpathv1alpha1.BenchmarkFailed))
			cond := apimeta.FindStatusCondition(got.Status.Conditions, fastpathv1alpha1.FailedCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(fastpathv1alpha1.ReasonVMsApart))
			g.Expect(cond.Message).To(And(ContainSubstring(nodes[0]), ContainSubstring(nodes[1])))
			g.Expect(got.Status.JobName).To(BeEmpty(), "no runner Job for VMs apart")
			g.Expect(got.Status.BestGbps).To(BeEmpty(), "no figure for VMs apart")
		}, time.Minute).Should(Succeed())
		AddReportEntry("benchmark between VMs apart", fmt.Sprintf("Failed VMsApart within %.1fs", time.Since(start).Seconds()))
	}, SpecTimeout(14*time.Minute))
})

// migrationFailure says why a migration failed: the VMI's migration state
// for it (KubeVirt's failure reason), else the migration's own state.
func migrationFailure(ctx SpecContext, m *kubevirtv1.VirtualMachineInstanceMigration) string {
	v := &kubevirtv1.VirtualMachineInstance{}
	if err := env.Client().Get(ctx, types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.VMIName}, v); err == nil {
		if st := v.Status.MigrationState; st != nil && st.MigrationUID == m.UID {
			return fmt.Sprintf("%s (source %s, target %s)", st.FailureReason, st.SourceNode, st.TargetNode)
		}
	}
	if st := m.Status.MigrationState; st != nil {
		return fmt.Sprintf("%s (source %s, target %s)", st.FailureReason, st.SourceNode, st.TargetNode)
	}
	return "no failure reason recorded"
}

// conditionsOf returns a VMI's conditions as metav1 conditions, for
// apimeta.FindStatusCondition.
func conditionsOf(v *kubevirtv1.VirtualMachineInstance) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range v.Status.Conditions {
		out = append(out, metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}

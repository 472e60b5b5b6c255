package e2e

import (
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
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
	// newVM is the first sample VM renamed, labelled app=<app>, halted
	// (started once the attachment has wired it), pinned to node unless "".
	newVM := func(name, app, node string) *kubevirtv1.VirtualMachine {
		vm := objs.VMs[0].DeepCopy()
		vm.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}}
		vm.Spec.Template.ObjectMeta.Labels = map[string]string{"app": app}
		halted := kubevirtv1.RunStrategyHalted
		vm.Spec.RunStrategy = &halted
		vm.Spec.Running = nil
		if node != "" {
			vm.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		}
		if kb := vm.Spec.Template.Spec.Domain.Firmware; kb != nil && kb.KernelBoot != nil {
			kb.KernelBoot.KernelArgs = strings.ReplaceAll(kb.KernelBoot.KernelArgs, "fp.vm="+objs.VMs[0].Name, "fp.vm="+name)
		}
		for i, v := range vm.Spec.Template.Spec.Volumes {
			if v.CloudInitNoCloud != nil {
				vm.Spec.Template.Spec.Volumes[i].CloudInitNoCloud.UserData = strings.ReplaceAll(v.CloudInitNoCloud.UserData, objs.VMs[0].Name, name)
			}
		}
		return vm
	}
	newAttachment := func(name, app, subnet string, placement fastpathv1alpha1.Placement) *fastpathv1alpha1.FastPathAttachment {
		a := objs.Attachment.DeepCopy()
		a.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns}
		a.Spec.VMSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		a.Spec.Placement = placement
		a.Spec.NetworkRef = &fastpathv1alpha1.NetworkReference{Name: network.Name}
		a.Spec.Network.IPAM.Subnet = subnet
		a.Spec.VSOCK = nil
		return a
	}
	setRunStrategy := func(ctx SpecContext, name string, s kubevirtv1.VirtualMachineRunStrategy) {
		GinkgoHelper()
		eventually(ctx, func(g Gomega) {
			vm := &kubevirtv1.VirtualMachine{}
			g.Expect(c().Get(ctx, key(name), vm)).To(Succeed())
			vm.Spec.RunStrategy = &s
			g.Expect(c().Update(ctx, vm)).To(Succeed())
		}, time.Minute).Should(Succeed())
	}
	// startWired creates the attachment and its halted VMs, waits until it
	// has wired every VM, then starts them and waits until each runs.
	startWired := func(ctx SpecContext, a *fastpathv1alpha1.FastPathAttachment, vms ...*kubevirtv1.VirtualMachine) {
		GinkgoHelper()
		Expect(c().Create(ctx, a)).To(Succeed())
		for _, vm := range vms {
			Expect(c().Create(ctx, vm)).To(Succeed())
		}
		eventually(ctx, func(g Gomega) {
			st := attachment(g, ctx, a.Name).Status.VMs
			for _, vm := range vms {
				g.Expect(st).To(ContainElement(And(HaveField("Name", vm.Name), HaveField("Wired", BeTrue()))))
			}
		}, 2*time.Minute).Should(Succeed())
		for _, vm := range vms {
			setRunStrategy(ctx, vm.Name, kubevirtv1.RunStrategyAlways)
		}
		for _, vm := range vms {
			eventually(ctx, func(g Gomega) {
				g.Expect(vmi(g, ctx, vm.Name).Status.Phase).To(Equal(kubevirtv1.Running))
			}, 5*time.Minute).Should(Succeed())
		}
	}
	// remove deletes the VMs (and the attachment) and waits until their
	// VMIs are gone.
	remove := func(ctx SpecContext, a *fastpathv1alpha1.FastPathAttachment, names ...string) {
		GinkgoHelper()
		for _, n := range names {
			Expect(client.IgnoreNotFound(c().Delete(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}))).To(Succeed())
		}
		if a != nil {
			Expect(client.IgnoreNotFound(c().Delete(ctx, a))).To(Succeed())
		}
		for _, n := range names {
			eventually(ctx, func(g Gomega) {
				err := c().Get(ctx, key(n), &kubevirtv1.VirtualMachineInstance{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "VMI %s still there: %v", n, err)
			}, 3*time.Minute).Should(Succeed())
		}
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
		DeferCleanup(func(ctx SpecContext) { remove(ctx, nil, vm.Name) }, NodeTimeout(4*time.Minute))
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

	It("places the VMs of a Required attachment on one node, Colocated=True naming it; a migration of one stays where it is", func(ctx SpecContext) {
		a := newAttachment("req-2n", "req-2n", "10.251.0.0/24", fastpathv1alpha1.PlacementRequired)
		vms := []*kubevirtv1.VirtualMachine{newVM("req-2n-0", "req-2n", ""), newVM("req-2n-1", "req-2n", "")}
		DeferCleanup(func(ctx SpecContext) { remove(ctx, a, vms[0].Name, vms[1].Name) }, NodeTimeout(4*time.Minute))
		startWired(ctx, a, vms...)
		node := vmi(Default, ctx, vms[0].Name).Status.NodeName
		Expect(vmi(Default, ctx, vms[1].Name).Status.NodeName).To(Equal(node), "placement Required")
		eventually(ctx, func(g Gomega) {
			cond := colocated(g, ctx, a.Name)
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(cond.Reason).To(Equal(fastpathv1alpha1.ReasonColocated))
			g.Expect(cond.Message).To(ContainSubstring("on node " + node))
		}, time.Minute).Should(Succeed())

		By("asking KubeVirt to migrate a wired VM: what happens today (issue 37 changes it)")
		v := vmi(Default, ctx, vms[0].Name)
		migratable := apimeta.FindStatusCondition(conditionsOf(v), string(kubevirtv1.VirtualMachineInstanceIsMigratable))
		m := migrate(ctx, vms[0].Name)
		var seen []string
		Consistently(ctx, func(g Gomega) {
			got := &kubevirtv1.VirtualMachineInstanceMigration{}
			g.Expect(c().Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			if p := string(got.Status.Phase); len(seen) == 0 || seen[len(seen)-1] != p {
				seen = append(seen, p)
			}
			g.Expect(got.Status.Phase).NotTo(Equal(kubevirtv1.MigrationSucceeded), "a Required VM moved")
			now := vmi(g, ctx, vms[0].Name)
			g.Expect(now.Status.NodeName).To(Equal(node))
			g.Expect(now.Status.Phase).To(Equal(kubevirtv1.Running))
			g.Expect(colocated(g, ctx, a.Name).Status).To(Equal(metav1.ConditionTrue))
		}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(Succeed())
		final := &kubevirtv1.VirtualMachineInstanceMigration{}
		Expect(c().Get(ctx, client.ObjectKeyFromObject(m), final)).To(Succeed())
		outcome := "phase " + string(final.Status.Phase)
		if final.Status.Phase == kubevirtv1.MigrationFailed {
			outcome += ": " + migrationFailure(ctx, final)
		}
		target := "no target pod"
		pods := &corev1.PodList{}
		Expect(c().List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{kubevirtv1.MigrationJobLabel: string(m.UID)})).To(Succeed())
		for _, p := range pods.Items {
			target = fmt.Sprintf("target pod %s %s", p.Name, p.Status.Phase)
			for _, pc := range p.Status.Conditions {
				if pc.Type == corev1.PodScheduled && pc.Status == corev1.ConditionFalse {
					target += ": " + pc.Reason + ": " + pc.Message
				}
			}
		}
		lm := "no LiveMigratable condition"
		if migratable != nil {
			lm = fmt.Sprintf("LiveMigratable=%s (%s: %s)", migratable.Status, migratable.Reason, migratable.Message)
		}
		report := fmt.Sprintf("VMI %s on %s, %s; migration phases %v after 1 min (%s); %s; the VMI stayed on %s, Running; attachment Colocated=True",
			vms[0].Name, node, lm, seen, outcome, target, node)
		AddReportEntry("migration of a Required VM", report)
		fmt.Fprintln(GinkgoWriter, "migration of a Required VM: "+report)
		Expect(client.IgnoreNotFound(c().Delete(ctx, m))).To(Succeed())
	}, SpecTimeout(14*time.Minute))

	It("reports the VMs of a None attachment pinned apart Colocated=False with both nodes, and a benchmark between them fails at once with VMsApart", func(ctx SpecContext) {
		a := newAttachment("none-2n", "none-2n", "10.251.1.0/24", fastpathv1alpha1.PlacementNone)
		vms := []*kubevirtv1.VirtualMachine{newVM("none-2n-0", "none-2n", nodes[0]), newVM("none-2n-1", "none-2n", nodes[1])}
		DeferCleanup(func(ctx SpecContext) { remove(ctx, a, vms[0].Name, vms[1].Name) }, NodeTimeout(4*time.Minute))
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

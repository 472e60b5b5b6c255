package attachment_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Relay ports are one range for the whole cluster (--relay-port-range), so
// the per-namespace cap (--relay-ports-per-namespace) is what keeps one
// tenant from taking the ports of the others (issue 39, Low: "the relay
// port range is cluster-wide").
var _ = Describe("Relay ports per namespace", Serial, func() {
	const perNamespace = 2

	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
		stopManager()
		opts := suiteOptions()
		opts.RelayPortsPerNamespace = perNamespace
		stopManager = startManagerWith(env.Config, opts)
		DeferCleanup(func() {
			stopManager()
			stopManager = startManager(env.Config)
		})
	})

	portsOf := func(ns, name string) func() []int64 {
		return func() []int64 {
			var out []int64
			for _, s := range getAttachment(ns, name).Status.VSOCKServices {
				out = append(out, s.RelayPort)
			}
			return out
		}
	}

	It("stops a namespace at its cap, says so, and leaves the other namespaces their ports", func() {
		node := "node-" + newNamespace()
		tenant, other := newNamespace(), newNamespace()
		createVM(tenant, "t-0", minimalVM, map[string]string{"app": "t"})
		createVMI(tenant, vmi{name: "t-0", node: node})
		newAttachment(tenant, "greedy", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("t"), VSOCK: vsock(
			v1alpha1.VSOCKService{Name: "s1", VM: "t-0", Port: 1},
			v1alpha1.VSOCKService{Name: "s2", VM: "t-0", Port: 2},
			v1alpha1.VSOCKService{Name: "s3", VM: "t-0", Port: 3},
		)})

		By("the tenant's namespace getting its cap of ports and no more")
		Eventually(conditionOf(tenant, "greedy", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonRelayPortsExhausted))
		Expect(conditionMessage(tenant, "greedy", v1alpha1.VSOCKReadyCondition)).To(And(
			ContainSubstring("service s3"), ContainSubstring("namespace "+tenant+" holds 2 relay ports"),
			ContainSubstring("--relay-ports-per-namespace")))
		Eventually(portsOf(tenant, "greedy")).Should(ConsistOf(BeNumerically(">=", relayPorts.First), BeNumerically(">=", relayPorts.First), BeZero()))

		By("another attachment of the same namespace counted against the same cap")
		createVM(tenant, "t-1", minimalVM, map[string]string{"app": "m"})
		createVMI(tenant, vmi{name: "t-1", node: node})
		newAttachment(tenant, "more", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("m"), VSOCK: vsock(
			v1alpha1.VSOCKService{Name: "s4", VM: "t-1", Port: 4},
		)})
		Eventually(conditionOf(tenant, "more", v1alpha1.VSOCKReadyCondition)).Should(Equal("False/" + v1alpha1.ReasonRelayPortsExhausted))
		Expect(portsOf(tenant, "more")()).To(Equal([]int64{0}))

		By("another namespace still getting ports from the same range")
		createVM(other, "o-0", minimalVM, map[string]string{"app": "o"})
		createVMI(other, vmi{name: "o-0", node: node})
		newAttachment(other, "fair", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("o"), VSOCK: vsock(
			v1alpha1.VSOCKService{Name: "a", VM: "o-0", Port: 1},
			v1alpha1.VSOCKService{Name: "b", VM: "o-0", Port: 2},
		)})
		taken := portsOf(tenant, "greedy")()
		Eventually(portsOf(other, "fair")).Should(ConsistOf(
			And(BeNumerically(">=", relayPorts.First), Not(BeElementOf(taken))),
			And(BeNumerically(">=", relayPorts.First), Not(BeElementOf(taken)))))
		Expect(conditionOf(other, "fair", v1alpha1.VSOCKReadyCondition)()).NotTo(HaveSuffix("/" + v1alpha1.ReasonRelayPortsExhausted))

		By("a port the tenant frees going to one of its waiting services, the cap still held")
		updateAttachment(tenant, "greedy", func(a *v1alpha1.FastPathAttachment) { a.Spec.VSOCK.Services = a.Spec.VSOCK.Services[1:] })
		Eventually(func() []string {
			var held []string
			for _, name := range []string{"greedy", "more"} {
				for _, svc := range getAttachment(tenant, name).Status.VSOCKServices {
					if svc.RelayPort > 0 {
						held = append(held, svc.Name)
					}
				}
			}
			return held
		}).Should(SatisfyAll(HaveLen(perNamespace), ContainElement("s2"), Not(ContainElement("s1"))))
	})
})

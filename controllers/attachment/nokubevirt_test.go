package attachment_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

var _ = Describe("An operator on a cluster without KubeVirt", Serial, func() {
	BeforeEach(func() {
		SetDefaultEventuallyTimeout(timeout)
		SetDefaultEventuallyPollingInterval(interval)
		SetDefaultConsistentlyDuration(quiet)
		SetDefaultConsistentlyPollingInterval(200 * time.Millisecond)
		// This spec's operator was told KubeVirt's API is not served (the
		// suite's fixture CRDs are there, so a VM exists to be left alone).
		stopManager()
		opts := suiteOptions()
		opts.KubeVirtAbsent = true
		stopManager = startManagerWith(env.Config, opts)
		DeferCleanup(func() {
			stopManager()
			stopManager = startManager(env.Config)
		})
	})

	It("renders the NetworkAttachmentDefinition, selects no VM and says why", func() {
		ns := newNamespace()
		createVM(ns, "db-0", minimalVM, map[string]string{"app": "db"})
		before := specJSON(ns, "db-0")
		newAttachment(ns, "db-link", v1alpha1.FastPathAttachmentSpec{VMSelector: selector("db"), Network: network(uniqueSubnet())})

		Eventually(conditionOf(ns, "db-link", v1alpha1.NetworkAttachmentReadyCondition)).Should(Equal("True/" + v1alpha1.ReasonNADCreated))
		Eventually(conditionOf(ns, "db-link", v1alpha1.VMsWiredCondition)).Should(Equal("False/" + v1alpha1.ReasonNoVMsSelected))
		Expect(conditionMessage(ns, "db-link", v1alpha1.VMsWiredCondition)).To(ContainSubstring("KubeVirt is not installed"))
		_, err := getNAD(ns, "db-link")
		Expect(err).NotTo(HaveOccurred())
		Expect(getAttachment(ns, "db-link").Status.SelectedVMs).To(BeZero())
		Consistently(func() string { return specJSON(ns, "db-0") }).Should(Equal(before), "a VM is never touched without KubeVirt's API")
	})
})

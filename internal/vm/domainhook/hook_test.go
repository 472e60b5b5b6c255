package domainhook

import (
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

func TestOnDefineDomain(t *testing.T) {
	domain := readFixture(t, fixtureKubeVirt)
	for _, tc := range []struct {
		name        string
		vmi         []byte
		wantChanged bool
		wantErr     []string
	}{
		{name: "VMI fixture with the design tuning", vmi: readFixture(t, fixtureVMI), wantChanged: true},
		{name: "no annotation", vmi: vmiWithAnnotation(t, "", true)},
		{name: "annotation without interfaces", vmi: vmiWithAnnotation(t, `{"interfaces":{}}`, false)},
		{name: "annotation for another network", vmi: vmiWithAnnotation(t, `{"interfaces":{"fp-other":{"mtu":9000}}}`, false)},
		{name: "annotation is not JSON", vmi: vmiWithAnnotation(t, `mtu=9000`, false),
			wantErr: []string{"failed to read annotation fastpath.io/tuning of VMI apps/db-0", "failed to parse tuning annotation"}},
		{name: "annotation is JSON of the wrong shape", vmi: vmiWithAnnotation(t, `{"interfaces":["fp-db-link"]}`, false),
			wantErr: []string{"failed to parse tuning annotation fastpath.io/tuning"}},
		{name: "rx ring out of range", vmi: vmiWithAnnotation(t, `{"interfaces":{"fp-db-link":{"rxQueueSize":4096}}}`, false),
			wantErr: []string{`interfaces["fp-db-link"].rxQueueSize 4096 is invalid: must be one of 256, 512, 1024`}},
		{name: "tx ring not 256", vmi: vmiWithAnnotation(t, `{"interfaces":{"fp-db-link":{"txQueueSize":1024}}}`, false),
			wantErr: []string{`interfaces["fp-db-link"].txQueueSize 1024 is invalid: must be 256 with the vhost driver`}},
		{name: "queues out of range", vmi: vmiWithAnnotation(t, `{"interfaces":{"fp-db-link":{"queues":1000}}}`, false),
			wantErr: []string{`interfaces["fp-db-link"].queues 1000 is invalid: must be 1-256`}},
		{name: "VMI is not JSON", vmi: []byte(`apiVersion: kubevirt.io/v1`), wantErr: []string{"failed to decode VMI JSON"}},
		{name: "VMI is null", vmi: []byte(" null\n"), wantErr: []string{"failed to decode VMI JSON: must be a JSON object (a VirtualMachineInstance), got null"}},
		{name: "VMI is empty", vmi: []byte(""), wantErr: []string{"must be a JSON object (a VirtualMachineInstance), got nothing"}},
		{name: "VMI is an array", vmi: []byte(`[{}]`), wantErr: []string{"must be a JSON object"}},
		{name: "unknown top-level tuning key", vmi: vmiWithAnnotation(t, `{"interfaces":{},"mtu":9000}`, false),
			wantErr: []string{`failed to read annotation fastpath.io/tuning of VMI apps/db-0: the annotation has unknown key "mtu": allowed keys are interfaces (case-sensitive)`}},
		{name: "unknown interface key", vmi: vmiWithAnnotation(t, `{"interfaces":{"fp-db-link":{"mtu":9000,"rxqueuesize":1024}}}`, false),
			wantErr: []string{`interfaces["fp-db-link"] has unknown key "rxqueuesize": allowed keys are mtu, queues, rxQueueSize, txQueueSize, offloads (case-sensitive)`}},
		{name: "unknown offload key", vmi: vmiWithAnnotation(t, `{"interfaces":{"fp-db-link":{"offloads":{"TSO":"Off"}}}}`, false),
			wantErr: []string{`interfaces["fp-db-link"].offloads has unknown key "TSO": allowed keys are tso, gso, gro, txChecksum, rxChecksum (case-sensitive)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			res, err := OnDefineDomain(tc.vmi, domain)
			if len(tc.wantErr) > 0 {
				g.Expect(err).To(gomega.HaveOccurred())
				for _, want := range tc.wantErr {
					g.Expect(err.Error()).To(gomega.ContainSubstring(want))
				}
				g.Expect(res).To(gomega.Equal(Result{}))
				return
			}
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(res.Changed()).To(gomega.Equal(tc.wantChanged))
			if !tc.wantChanged {
				g.Expect(res.Domain).To(gomega.Equal(domain))
				return
			}
			fp := iface(parseDoc(t, res.Domain), "ua-fp-db-link")
			g.Expect(attrs(child(fp, "driver"))).To(gomega.Equal(map[string]string{"name": "vhost", "queues": "4", "rx_queue_size": "1024", "tx_queue_size": "256"}))
		})
	}
}

func TestTuningFromVMIReadsTheAnnotation(t *testing.T) {
	g := gomega.NewWithT(t)
	a, found, err := TuningFromVMI(readFixture(t, fixtureVMI))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(found).To(gomega.BeTrue())
	g.Expect(a.Interfaces).To(gomega.Equal(annotation(map[string]domaintuning.Interface{"fp-db-link": designTuning()}).Interfaces))

	_, found, err = TuningFromVMI(vmiWithAnnotation(t, "", true))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(found).To(gomega.BeFalse())
}

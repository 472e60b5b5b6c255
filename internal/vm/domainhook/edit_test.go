package domainhook

import (
	"strings"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

var (
	allOn = map[string]string{"csum": "on", "gso": "on", "tso4": "on", "tso6": "on", "ecn": "on"}
	// guestAllOn has no gso: libvirt's <guest> has none (GSO is a host feature bit).
	guestAllOn = map[string]string{"csum": "on", "tso4": "on", "tso6": "on", "ecn": "on"}
)

func TestApplyTunesKubeVirtDomain(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tuning     domaintuning.Interface
		wantDriver map[string]string
		wantHost   map[string]string
		wantGuest  map[string]string
		wantMTU    map[string]string
		wantWarn   []string
	}{{
		name:       "design example",
		tuning:     designTuning(),
		wantDriver: map[string]string{"name": "vhost", "queues": "4", "rx_queue_size": "1024", "tx_queue_size": "256"},
		wantHost:   allOn,
		wantGuest:  guestAllOn,
		wantMTU:    map[string]string{"size": "9000"},
	}, {
		name:       "every offload off",
		tuning:     domaintuning.Interface{Offloads: domaintuning.Offloads{TSO: "Off", GSO: "Off", GRO: "Off", TXChecksum: "Off", RXChecksum: "Off"}},
		wantDriver: map[string]string{"name": "vhost"},
		wantHost:   map[string]string{"csum": "off", "gso": "off", "tso4": "off", "tso6": "off", "ecn": "off"},
		wantGuest:  map[string]string{"csum": "off", "tso4": "off", "tso6": "off", "ecn": "off"},
		wantMTU:    map[string]string{"size": "9000"},
	}, {
		name:       "only the rx ring: nothing else is written",
		tuning:     domaintuning.Interface{RxQueueSize: 512},
		wantDriver: map[string]string{"name": "vhost", "rx_queue_size": "512"},
		wantMTU:    map[string]string{"size": "9000"},
	}, {
		name:       "gro alone sets only the guest side",
		tuning:     domaintuning.Interface{Offloads: domaintuning.Offloads{GRO: "On"}},
		wantDriver: map[string]string{"name": "vhost"},
		wantGuest:  map[string]string{"tso4": "on", "tso6": "on", "ecn": "on"},
		wantMTU:    map[string]string{"size": "9000"},
	}, {
		name:    "only the MTU: no driver element",
		tuning:  domaintuning.Interface{MTU: 1500},
		wantMTU: map[string]string{"size": "1500"},
	}, {
		name:       "queues are capped at the vCPUs",
		tuning:     domaintuning.Interface{Queues: 16},
		wantDriver: map[string]string{"name": "vhost", "queues": "4"},
		wantMTU:    map[string]string{"size": "9000"},
		wantWarn:   []string{`interfaces["fp-db-link"].queues 16 capped at the domain's 4 vCPUs`},
	}, {
		name:     "an MTU above the pod interface's is lowered to it",
		tuning:   domaintuning.Interface{MTU: 65000},
		wantMTU:  map[string]string{"size": "9000"},
		wantWarn: []string{`interfaces["fp-db-link"].mtu 65000 lowered to 9000`},
	}, {
		name:       "txChecksum is the host side only",
		tuning:     domaintuning.Interface{Offloads: domaintuning.Offloads{TXChecksum: "Off"}},
		wantDriver: map[string]string{"name": "vhost"},
		wantHost:   map[string]string{"csum": "off"},
		wantMTU:    map[string]string{"size": "9000"},
	}, {
		name:       "rxChecksum is the guest side only",
		tuning:     domaintuning.Interface{Offloads: domaintuning.Offloads{RXChecksum: "Off"}},
		wantDriver: map[string]string{"name": "vhost"},
		wantGuest:  map[string]string{"csum": "off"},
		wantMTU:    map[string]string{"size": "9000"},
	}, {
		name:       "segmentation without checksum offload is written and reported",
		tuning:     domaintuning.Interface{Offloads: domaintuning.Offloads{TSO: "On", GSO: "On", GRO: "On", TXChecksum: "Off", RXChecksum: "Off"}},
		wantDriver: map[string]string{"name": "vhost"},
		wantHost:   map[string]string{"csum": "off", "gso": "on", "tso4": "on", "tso6": "on", "ecn": "on"},
		wantGuest:  map[string]string{"csum": "off", "tso4": "on", "tso6": "on", "ecn": "on"},
		wantMTU:    map[string]string{"size": "9000"},
		wantWarn: []string{
			"offloads.tso On has no effect with txChecksum Off (virtio: HOST_TSO4, HOST_TSO6, HOST_ECN need CSUM)",
			"offloads.gso On has no effect with txChecksum Off (virtio: GSO needs CSUM)",
			"offloads.gro On has no effect with rxChecksum Off (virtio: GUEST_TSO4, GUEST_TSO6, GUEST_ECN need GUEST_CSUM)",
		},
	}, {
		name:       "gro needs rxChecksum, not txChecksum",
		tuning:     domaintuning.Interface{Offloads: domaintuning.Offloads{GRO: "On", TXChecksum: "Off", RXChecksum: "On"}},
		wantDriver: map[string]string{"name": "vhost"},
		wantHost:   map[string]string{"csum": "off"},
		wantGuest:  map[string]string{"csum": "on", "tso4": "on", "tso6": "on", "ecn": "on"},
		wantMTU:    map[string]string{"size": "9000"},
	}, {
		name:       "legacy GSO bit without TSO is reported",
		tuning:     domaintuning.Interface{Offloads: domaintuning.Offloads{TSO: "Off", GSO: "On"}},
		wantDriver: map[string]string{"name": "vhost"},
		wantHost:   map[string]string{"gso": "on", "tso4": "off", "tso6": "off", "ecn": "off"},
		wantMTU:    map[string]string{"size": "9000"},
		wantWarn:   []string{"gso On with tso Off lets a legacy (transitional) virtio driver use TSO"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			in := readFixture(t, fixtureKubeVirt)
			res, err := Apply(in, annotation(map[string]domaintuning.Interface{"fp-db-link": tc.tuning}))
			g.Expect(err).NotTo(gomega.HaveOccurred())

			out := parseDoc(t, res.Domain)
			fp := iface(out, "ua-fp-db-link")
			g.Expect(fp).NotTo(gomega.BeNil())
			g.Expect(attrs(child(fp, "driver"))).To(gomega.Equal(tc.wantDriver))
			g.Expect(attrs(child(fp, "driver/host"))).To(gomega.Equal(tc.wantHost))
			g.Expect(attrs(child(fp, "driver/guest"))).To(gomega.Equal(tc.wantGuest))
			g.Expect(attrs(child(fp, "mtu"))).To(gomega.Equal(tc.wantMTU))

			g.Expect(res.Warnings).To(gomega.HaveLen(len(tc.wantWarn)))
			for i, w := range tc.wantWarn {
				g.Expect(res.Warnings[i]).To(gomega.ContainSubstring(w))
			}
			// Everything but the tuned interface, and the tuned interface's
			// other children, are as KubeVirt wrote them.
			g.Expect(canonicalWithout(t, res.Domain, "ua-fp-db-link")).To(gomega.Equal(canonicalWithout(t, in, "ua-fp-db-link")))
			g.Expect(canonicalChildren(t, fp, "driver", "mtu")).To(gomega.Equal(canonicalChildren(t, iface(parseDoc(t, in), "ua-fp-db-link"), "driver", "mtu")))
		})
	}
}

func TestApplyChangesOnlyTheInsertedLinesOfAKubeVirtDomain(t *testing.T) {
	g := gomega.NewWithT(t)
	in := string(readFixture(t, fixtureKubeVirt))
	res, err := Apply([]byte(in), annotation(map[string]domaintuning.Interface{"fp-db-link": designTuning()}))
	g.Expect(err).NotTo(gomega.HaveOccurred())

	anchor := "<alias name=\"ua-fp-db-link\"></alias>\n\t\t\t<rom enabled=\"no\"></rom>\n"
	g.Expect(strings.Count(in, anchor)).To(gomega.Equal(1))
	inserted := "\t\t\t<driver name=\"vhost\" queues=\"4\" rx_queue_size=\"1024\" tx_queue_size=\"256\">\n" +
		"\t\t\t\t<host csum=\"on\" gso=\"on\" tso4=\"on\" tso6=\"on\" ecn=\"on\"></host>\n" +
		"\t\t\t\t<guest csum=\"on\" tso4=\"on\" tso6=\"on\" ecn=\"on\"></guest>\n" +
		"\t\t\t</driver>\n"
	g.Expect(string(res.Domain)).To(gomega.Equal(strings.Replace(in, anchor, anchor+inserted, 1)))

	g.Expect(res.Changes).To(gomega.HaveLen(13))
	g.Expect(res.Changes[0]).To(gomega.Equal(Change{Network: "fp-db-link", Element: "driver", Attr: "name", From: "", To: "vhost"}))
	g.Expect(res.Changes).To(gomega.ContainElement(Change{Network: "fp-db-link", Element: "driver/guest", Attr: "tso4", To: "on"}))
	g.Expect(res.Changes).NotTo(gomega.ContainElement(gomega.HaveField("Element", "mtu")), "the MTU was already 9000")
}

func TestApplyKeepsVirshStyle(t *testing.T) {
	g := gomega.NewWithT(t)
	in := string(readFixture(t, fixtureVirsh))
	res, err := Apply([]byte(in), annotation(map[string]domaintuning.Interface{"fp-db-link": designTuning()}))
	g.Expect(err).NotTo(gomega.HaveOccurred())

	anchor := "      <alias name='ua-fp-db-link'/>\n      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>\n"
	g.Expect(strings.Count(in, anchor)).To(gomega.Equal(1))
	inserted := "      <driver name='vhost' queues='4' rx_queue_size='1024' tx_queue_size='256'>\n" +
		"        <host csum='on' gso='on' tso4='on' tso6='on' ecn='on'/>\n" +
		"        <guest csum='on' tso4='on' tso6='on' ecn='on'/>\n" +
		"      </driver>\n" +
		"      <mtu size='9000'/>\n"
	g.Expect(string(res.Domain)).To(gomega.Equal(strings.Replace(in, anchor, anchor+inserted, 1)))
}

func TestApplyPreservesWhatItDoesNotKnow(t *testing.T) {
	g := gomega.NewWithT(t)
	in := readFixture(t, fixtureExtras)
	res, err := Apply(in, annotation(map[string]domaintuning.Interface{
		"fp-db-link":    designTuning(),
		"fp-cache-link": {MTU: 9000, RxQueueSize: 256, Offloads: domaintuning.Offloads{GRO: "Off"}},
	}))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(res.Warnings).To(gomega.ConsistOf(gomega.ContainSubstring(`queues 4 capped at the domain's 2 vCPUs`)))

	out := parseDoc(t, res.Domain)
	db := iface(out, "ua-fp-db-link")
	driver := child(db, "driver")
	// Existing attributes keep their place, libvirt options the hook does not
	// know (packed, mrg_rxbuf) survive, and queues follow <vcpu current='2'>.
	g.Expect(attrKeys(driver)).To(gomega.Equal([]string{"name", "queues", "packed", "rx_queue_size", "tx_queue_size"}))
	g.Expect(attrs(driver)).To(gomega.Equal(map[string]string{"name": "vhost", "queues": "2", "packed": "on", "rx_queue_size": "1024", "tx_queue_size": "256"}))
	g.Expect(attrKeys(child(db, "driver/host"))).To(gomega.Equal([]string{"mrg_rxbuf", "tso4", "csum", "gso", "tso6", "ecn"}))
	g.Expect(attrs(child(db, "driver/host"))).To(gomega.Equal(map[string]string{"mrg_rxbuf": "off", "csum": "on", "gso": "on", "tso4": "on", "tso6": "on", "ecn": "on"}))
	g.Expect(attrs(child(db, "driver/guest"))).To(gomega.Equal(guestAllOn))
	g.Expect(res.Changes).To(gomega.ContainElement(Change{Network: "fp-db-link", Element: "driver/host", Attr: "tso4", From: "off", To: "on"}))
	g.Expect(res.Changes).NotTo(gomega.ContainElement(Change{Network: "fp-db-link", Element: "driver", Attr: "queues", From: "2", To: "2"}))

	cache := iface(out, "ua-fp-cache-link")
	g.Expect(attrs(child(cache, "driver"))).To(gomega.Equal(map[string]string{"name": "vhost", "rx_queue_size": "256"}))
	g.Expect(attrs(child(cache, "driver/host"))).To(gomega.BeNil())
	g.Expect(attrs(child(cache, "driver/guest"))).To(gomega.Equal(map[string]string{"tso4": "off", "tso6": "off", "ecn": "off"}))
	g.Expect(attrs(child(cache, "mtu"))).To(gomega.Equal(map[string]string{"size": "9000"}))

	// The masquerade interface keeps KubeVirt's multiqueue driver.
	g.Expect(attrs(child(iface(out, "ua-default"), "driver"))).To(gomega.Equal(map[string]string{"name": "vhost", "queues": "2"}))

	g.Expect(canonicalWithout(t, res.Domain, "ua-fp-db-link", "ua-fp-cache-link")).
		To(gomega.Equal(canonicalWithout(t, in, "ua-fp-db-link", "ua-fp-cache-link")))
	for _, s := range []string{
		`<domain type="kvm" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">`,
		`<qemu:arg value="name=opt/fastpath/test,string=keep"></qemu:arg>`,
		`<qemu:env name="FASTPATH_TEST" value="1"></qemu:env>`,
		`<fp:note xmlns:fp="https://fastpath.io/test" kept="yes">an element libvirt and KubeVirt do not know</fp:note>`,
		`<!-- fastpath test: comments, foreign namespaces and unmodelled attributes must survive -->`,
		`<kubevirt xmlns="http://kubevirt.io">`,
		`<vcpu placement="static" current="2">4</vcpu>`,
	} {
		g.Expect(string(res.Domain)).To(gomega.ContainSubstring(s))
	}
}

func TestApplyLeavesTheDomainAlone(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fixture  string
		tuning   domaintuning.Annotation
		wantWarn []string
	}{
		{name: "empty tuning", fixture: fixtureKubeVirt, tuning: annotation(nil)},
		{name: "no interface has the alias", fixture: fixtureKubeVirt,
			tuning:   annotation(map[string]domaintuning.Interface{"fp-other": designTuning()}),
			wantWarn: []string{"Tuning for network fp-other has no domain interface with alias ua-fp-other"}},
		{name: "an interface without ua- alias prefix is never matched", fixture: fixtureVirsh,
			tuning:   annotation(map[string]domaintuning.Interface{"ua-fp-db-link": designTuning()}),
			wantWarn: []string{"alias ua-ua-fp-db-link"}},
		{name: "values already as tuned", fixture: fixtureKubeVirt,
			tuning: annotation(map[string]domaintuning.Interface{"fp-db-link": {MTU: 9000}, "default": {MTU: 1400}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			in := readFixture(t, tc.fixture)
			res, err := Apply(in, tc.tuning)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(res.Changed()).To(gomega.BeFalse())
			g.Expect(res.Domain).To(gomega.Equal(in))
			g.Expect(res.Warnings).To(gomega.HaveLen(len(tc.wantWarn)))
			for i, w := range tc.wantWarn {
				g.Expect(res.Warnings[i]).To(gomega.ContainSubstring(w))
			}
		})
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	for _, fixture := range []string{fixtureKubeVirt, fixtureExtras, fixtureVirsh} {
		t.Run(fixture, func(t *testing.T) {
			g := gomega.NewWithT(t)
			a := annotation(map[string]domaintuning.Interface{"fp-db-link": designTuning(), "fp-cache-link": {Queues: 1}})
			first, err := Apply(readFixture(t, fixture), a)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(first.Changed()).To(gomega.BeTrue())
			second, err := Apply(first.Domain, a)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(second.Changes).To(gomega.BeEmpty())
			g.Expect(second.Domain).To(gomega.Equal(first.Domain))
		})
	}
}

func TestApplyRejectsBadInput(t *testing.T) {
	kubevirt := string(readFixture(t, fixtureKubeVirt))
	fpIface := kubevirt[strings.Index(kubevirt, "\t\t<interface type=\"ethernet\">\n\t\t\t<source></source>\n\t\t\t<target dev=\"tapa527fe112a5\""):]
	fpIface = fpIface[:strings.Index(fpIface, "</interface>\n")+len("</interface>\n")]
	one := func(t domaintuning.Interface) domaintuning.Annotation {
		return annotation(map[string]domaintuning.Interface{"fp-db-link": t})
	}
	for _, tc := range []struct {
		name    string
		domain  string
		tuning  domaintuning.Annotation
		wantErr []string
	}{
		{name: "tx ring above 256 with vhost", domain: kubevirt, tuning: one(domaintuning.Interface{TxQueueSize: 512}),
			wantErr: []string{`interfaces["fp-db-link"].txQueueSize 512 is invalid: must be 256 with the vhost driver`, "fastpath.io/tuning"}},
		{name: "rx ring not a virtio ring size", domain: kubevirt, tuning: one(domaintuning.Interface{RxQueueSize: 300}),
			wantErr: []string{`interfaces["fp-db-link"].rxQueueSize 300 is invalid: must be one of 256, 512, 1024`}},
		{name: "rx ring too large", domain: kubevirt, tuning: one(domaintuning.Interface{RxQueueSize: 2048}),
			wantErr: []string{`rxQueueSize 2048 is invalid: must be one of 256, 512, 1024`}},
		{name: "too many queues", domain: kubevirt, tuning: one(domaintuning.Interface{Queues: 257}),
			wantErr: []string{`interfaces["fp-db-link"].queues 257 is invalid: must be 1-256`}},
		{name: "negative queues", domain: kubevirt, tuning: one(domaintuning.Interface{Queues: -1}),
			wantErr: []string{`queues -1 is invalid: must be 1-256`}},
		{name: "MTU below IPv6 minimum", domain: kubevirt, tuning: one(domaintuning.Interface{MTU: 1000}),
			wantErr: []string{`interfaces["fp-db-link"].mtu 1000 is invalid: must be 1280-65535`}},
		{name: "offload neither On nor Off", domain: kubevirt, tuning: one(domaintuning.Interface{Offloads: domaintuning.Offloads{TSO: "on"}}),
			wantErr: []string{`interfaces["fp-db-link"].offloads.tso "on" is invalid: must be On or Off`}},
		{name: "domain not XML", domain: "not xml at all", tuning: one(designTuning()),
			wantErr: []string{"failed to parse domain XML"}},
		{name: "domain cut short", domain: kubevirt[:len(kubevirt)/2], tuning: one(designTuning()),
			wantErr: []string{"failed to parse domain XML"}},
		{name: "root is not a domain", domain: "<network><name>default</name></network>", tuning: one(designTuning()),
			wantErr: []string{"failed to parse domain XML: the root element is <network>, not <domain>"}},
		{name: "two root elements", domain: kubevirt + kubevirt, tuning: one(designTuning()),
			wantErr: []string{"failed to parse domain XML: the document has 2 root elements, want 1"}},
		{name: "text after the root", domain: kubevirt + "\ntrailing", tuning: one(designTuning()),
			wantErr: []string{"failed to parse domain XML: text outside the root element"}},
		{name: "empty domain", domain: "", tuning: one(designTuning()),
			wantErr: []string{"failed to parse domain XML"}},
		{name: "tuned interface is not virtio", domain: string(readFixture(t, fixtureVirsh)),
			tuning:  annotation(map[string]domaintuning.Interface{"mgmt": {RxQueueSize: 1024}}),
			wantErr: []string{`failed to tune interface ua-mgmt: its model "e1000e" is not virtio`}},
		{name: "two interfaces with one alias", domain: strings.Replace(kubevirt, fpIface, fpIface+fpIface, 1), tuning: one(designTuning()),
			wantErr: []string{"failed to tune interface ua-fp-db-link: the domain has two interfaces with this alias"}},
		{name: "vCPU count not a number", domain: strings.Replace(kubevirt, `<vcpu placement="static">4</vcpu>`, `<vcpu placement="static">four</vcpu>`, 1),
			tuning: one(designTuning()), wantErr: []string{`failed to read the vCPU count of the domain "four"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			res, err := Apply([]byte(tc.domain), tc.tuning)
			g.Expect(err).To(gomega.HaveOccurred())
			for _, want := range tc.wantErr {
				g.Expect(err.Error()).To(gomega.ContainSubstring(want))
			}
			g.Expect(res).To(gomega.Equal(Result{}), "no half-edited domain is returned")
		})
	}
}

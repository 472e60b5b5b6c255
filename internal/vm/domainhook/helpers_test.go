package domainhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/beevik/etree"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// Fixtures (testdata/):
//   - domain-kubevirt.xml: a domain as KubeVirt v1.6 hands it to the hook
//     (encoding/xml with a tab indent, explicit end tags): a masquerade pod
//     network interface ua-default (tap0, MTU 1400) and a bridge-bound Multus
//     interface ua-fp-db-link (MTU 9000), disks, vsock, 4 vCPUs. The block
//     disk's <source> lacks KubeVirt's name= attribute, which libvirt 9.0's
//     schema rejects, so the fixture validates.
//   - domain-extras.xml: the same with multiqueue drivers, an unmodelled
//     <driver packed='on'> and <host mrg_rxbuf='off' tso4='off'>, a second
//     fast-path interface, qemu:commandline, a foreign-namespace metadata
//     element, a comment and <vcpu current='2'>.
//   - domain-virsh.xml: virsh dumpxml style (single quotes, self-closing tags,
//     two-space indent, XML declaration) with a bridge interface and an
//     e1000e interface.
//   - vmi.json: the VMI of domain-kubevirt.xml as the sidecar-shim passes it,
//     annotated with docs/design.md §3.1's tuning.

const (
	fixtureKubeVirt = "domain-kubevirt.xml"
	fixtureExtras   = "domain-extras.xml"
	fixtureVirsh    = "domain-virsh.xml"
	fixtureVMI      = "vmi.json"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("failed to read fixture %s: %v", name, err)
	}
	return b
}

// designTuning is the tuning of docs/design.md §3.1 for network fp-db-link.
func designTuning() domaintuning.Interface {
	return domaintuning.Interface{MTU: 9000, Queues: 4, RxQueueSize: 1024, TxQueueSize: 256,
		Offloads: domaintuning.Offloads{TSO: "On", GSO: "On", GRO: "On", TXChecksum: "On", RXChecksum: "On"}}
}

func annotation(byNetwork map[string]domaintuning.Interface) domaintuning.Annotation {
	return domaintuning.Annotation{Interfaces: byNetwork}
}

// vmiWithAnnotation returns the VMI fixture as JSON with the tuning
// annotation set to value, or removed when remove is true.
func vmiWithAnnotation(t testing.TB, value string, remove bool) []byte {
	t.Helper()
	var vmi kubevirtv1.VirtualMachineInstance
	if err := json.Unmarshal(readFixture(t, fixtureVMI), &vmi); err != nil {
		t.Fatalf("failed to decode VMI fixture: %v", err)
	}
	if remove {
		delete(vmi.Annotations, domaintuning.AnnotationKey)
	} else {
		vmi.Annotations[domaintuning.AnnotationKey] = value
	}
	b, err := json.Marshal(&vmi)
	if err != nil {
		t.Fatalf("failed to encode VMI: %v", err)
	}
	return b
}

func parseDoc(t testing.TB, b []byte) *etree.Document {
	t.Helper()
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(b); err != nil {
		t.Fatalf("failed to parse XML: %v\n%s", err, b)
	}
	return doc
}

// iface returns the <interface> with <alias name=alias>, or nil.
func iface(doc *etree.Document, alias string) *etree.Element {
	for _, el := range doc.FindElements("/domain/devices/interface") {
		if a := el.SelectElement("alias"); a != nil && a.SelectAttrValue("name", "") == alias {
			return el
		}
	}
	return nil
}

// child returns the element at path below el ("driver", "driver/host"), or nil.
func child(el *etree.Element, path string) *etree.Element {
	if el == nil {
		return nil
	}
	return el.FindElement(path)
}

// attrs returns the attributes of el as a map, nil for a missing element.
func attrs(el *etree.Element) map[string]string {
	if el == nil {
		return nil
	}
	m := map[string]string{}
	for _, a := range el.Attr {
		m[a.FullKey()] = a.Value
	}
	return m
}

// attrKeys returns the attribute names of el in document order.
func attrKeys(el *etree.Element) []string {
	var keys []string
	for _, a := range el.Attr {
		keys = append(keys, a.FullKey())
	}
	return keys
}

// canonicalWithout returns b re-serialised in one fixed style with the
// interfaces of the given aliases removed, so two documents that differ only
// inside those interfaces compare equal.
func canonicalWithout(t testing.TB, b []byte, aliases ...string) string {
	t.Helper()
	doc := parseDoc(t, b)
	for _, alias := range aliases {
		if el := iface(doc, alias); el != nil {
			el.Parent().RemoveChild(el)
		}
	}
	doc.WriteSettings = etree.WriteSettings{CanonicalEndTags: true}
	s, err := doc.WriteToString()
	if err != nil {
		t.Fatalf("failed to write XML: %v", err)
	}
	return s
}

// canonicalChildren returns the children of el other than the skipped tags,
// re-serialised in one fixed style.
func canonicalChildren(t testing.TB, el *etree.Element, skip ...string) []string {
	t.Helper()
	var out []string
	for _, c := range el.ChildElements() {
		if slices.Contains(skip, c.Tag) {
			continue
		}
		doc := etree.NewDocumentWithRoot(c.Copy())
		doc.WriteSettings = etree.WriteSettings{CanonicalEndTags: true}
		s, err := doc.WriteToString()
		if err != nil {
			t.Fatalf("failed to write XML: %v", err)
		}
		out = append(out, s)
	}
	return out
}

package domainhook

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// AliasPrefix is the prefix KubeVirt puts before user-defined device aliases
// (kubevirt pkg/virt-launcher/virtwrap/api/schema.go, UserAliasPrefix): the
// interface of VM network N has <alias name='ua-N'/>.
const AliasPrefix = "ua-"

// VhostTxQueueSize is the only tx ring size (descriptors) vhost-net takes:
// QEMU grows the tx ring beyond 256 only for vhost-user peers
// (hw/net/virtio-net.c, virtio_net_max_tx_queue_size; docs/design.md §4.2).
const VhostTxQueueSize = 256

// defaultVCPUs is libvirt's vCPU count for a domain without <vcpu>.
const defaultVCPUs = 1

// offloadTarget is one libvirt attribute an offload sets: <driver><Elem Attr=.../>.
type offloadTarget struct {
	Elem string // "host" or "guest"
	Attr string
}

// libvirtAttrOrder is the order in which libvirt itself writes the offload
// attributes of <driver><host/> and <driver><guest/> (libvirt formatdomain
// "Setting NIC driver-specific options"), so an edited domain reads as one
// libvirt formatted.
var libvirtAttrOrder = []offloadTarget{
	{"host", "csum"}, {"host", "gso"}, {"host", "tso4"}, {"host", "tso6"}, {"host", "ecn"}, {"host", "ufo"}, {"host", "mrg_rxbuf"},
	{"guest", "csum"}, {"guest", "tso4"}, {"guest", "tso6"}, {"guest", "ecn"}, {"guest", "ufo"},
}

// virtioFeature is the virtio-net feature bit behind each libvirt offload
// attribute (libvirt formatdomain; QEMU hw/net/virtio-net.c
// virtio_net_properties; virtio 1.2 §5.1.3).
var virtioFeature = map[offloadTarget]string{
	{"host", "csum"}: "CSUM", {"host", "gso"}: "GSO", {"host", "tso4"}: "HOST_TSO4", {"host", "tso6"}: "HOST_TSO6",
	{"host", "ecn"}: "HOST_ECN", {"host", "ufo"}: "HOST_UFO", {"host", "mrg_rxbuf"}: "MRG_RXBUF",
	{"guest", "csum"}: "GUEST_CSUM", {"guest", "tso4"}: "GUEST_TSO4", {"guest", "tso6"}: "GUEST_TSO6",
	{"guest", "ecn"}: "GUEST_ECN", {"guest", "ufo"}: "GUEST_UFO",
}

// virtioNeeds maps an offload attribute to the checksum attribute without
// which its feature bit has no effect (virtio 1.2 §5.1.3.1: HOST_TSO4/6 and
// HOST_UFO require CSUM, HOST_ECN requires HOST_TSO4 or HOST_TSO6 and so
// CSUM, and the same on the guest side with GUEST_CSUM; the legacy GSO bit is
// honoured by Linux's virtio_net only with CSUM, virtnet_probe).
var virtioNeeds = map[offloadTarget]offloadTarget{
	{"host", "gso"}: {"host", "csum"}, {"host", "tso4"}: {"host", "csum"}, {"host", "tso6"}: {"host", "csum"},
	{"host", "ecn"}: {"host", "csum"}, {"host", "ufo"}: {"host", "csum"},
	{"guest", "tso4"}: {"guest", "csum"}, {"guest", "tso6"}: {"guest", "csum"},
	{"guest", "ecn"}: {"guest", "csum"}, {"guest", "ufo"}: {"guest", "csum"},
}

// offloadSettings returns the libvirt attributes o switches, in
// libvirtAttrOrder, each with the name of the offload (a row of
// wellknown.Offloads, whose Host and Guest name its attributes) that sets it
// and "on" or "off"; offloads o leaves unset ("") are left out. See the
// package documentation for the mapping; sources: libvirt formatdomain, QEMU
// virtio_net_properties, virtio 1.2 §5.1.3.
func offloadSettings(o domaintuning.Offloads) []offloadSetting {
	var out []offloadSetting
	for _, t := range libvirtAttrOrder {
		for _, row := range wellknown.Offloads {
			attrs := row.Host
			if t.Elem == "guest" {
				attrs = row.Guest
			}
			state := *o.Offload(row.Name)
			if state == "" || !slices.Contains(attrs, t.Attr) {
				continue
			}
			value := "off"
			if state == v1alpha1.OffloadOn {
				value = "on"
			}
			out = append(out, offloadSetting{Target: t, Offload: row.Name, Value: value})
		}
	}
	return out
}

// offloadSetting is one libvirt offload attribute to set.
type offloadSetting struct {
	Target  offloadTarget
	Offload string // the row of wellknown.Offloads that sets it
	Value   string // "on" or "off"
}

// Apply edits the interfaces of domainXML whose alias is "ua-<network>" for a
// network in a, and keeps everything else of the document: unknown elements and
// attributes, attribute order, comments, processing instructions, namespace
// prefixes (qemu:commandline) and whitespace. The document is edited as a tree
// with github.com/beevik/etree, never decoded into a schema struct, and written
// back with explicit end tags (<x></x>) as KubeVirt's encoding/xml output has,
// so untouched parts of a KubeVirt domain come back byte for byte. New
// elements are indented like their siblings.
//
// When a names no interface of the domain, Result.Domain is domainXML itself.
// Errors (nothing is returned then): a fails Validate; a txQueueSize other
// than VhostTxQueueSize; domainXML is not well-formed or its root is not
// <domain>; two interfaces share an alias; a tuned interface's model is not
// virtio; the <vcpu> count is not a number.
func Apply(domainXML []byte, a domaintuning.Annotation) (Result, error) {
	if err := validateForVhost(a); err != nil {
		return Result{}, err
	}
	doc := etree.NewDocument()
	// etree's ReadSettings.ValidateInput would also reject the newline after
	// the root element that virsh writes, so the document level is checked by
	// checkDocument instead; etree itself rejects syntax errors, unclosed and
	// mismatched tags.
	doc.ReadSettings = etree.ReadSettings{PreserveCData: true, PreserveDuplicateAttrs: true}
	doc.WriteSettings = writeStyle(domainXML)
	if err := doc.ReadFromBytes(domainXML); err != nil {
		return Result{}, fmt.Errorf("failed to parse domain XML: %w", err)
	}
	if err := checkDocument(doc); err != nil {
		return Result{}, fmt.Errorf("failed to parse domain XML: %w", err)
	}
	root := doc.Root()
	vcpus, err := domainVCPUs(root)
	if err != nil {
		return Result{}, err
	}

	ed := &editor{}
	tuned := map[string]bool{}
	if devices := root.SelectElement("devices"); devices != nil {
		for _, iface := range devices.SelectElements("interface") {
			alias := ""
			if el := iface.SelectElement("alias"); el != nil {
				alias = el.SelectAttrValue("name", "")
			}
			network, ok := strings.CutPrefix(alias, AliasPrefix)
			if !ok {
				continue
			}
			t, ok := a.Interfaces[network]
			if !ok {
				continue
			}
			if tuned[network] {
				return Result{}, fmt.Errorf("failed to tune interface %s: the domain has two interfaces with this alias", alias)
			}
			tuned[network] = true
			if err := ed.tuneInterface(iface, network, t, vcpus); err != nil {
				return Result{}, err
			}
		}
	}
	for _, network := range sortedNetworks(a) {
		if !tuned[network] {
			ed.warnf("Tuning for network %s has no domain interface with alias %s%s; nothing applied for it", network, AliasPrefix, network)
		}
	}

	if len(ed.changes) == 0 {
		return Result{Domain: domainXML, Warnings: ed.warnings}, nil
	}
	out, err := doc.WriteToBytes()
	if err != nil {
		return Result{}, fmt.Errorf("failed to write domain XML: %w", err)
	}
	return Result{Domain: out, Changes: ed.changes, Warnings: ed.warnings}, nil
}

// checkDocument checks what etree's parser lets through at the document
// level: the document must hold exactly one element, <domain>, and no text
// outside it.
func checkDocument(doc *etree.Document) error {
	elements := 0
	for _, t := range doc.Child {
		switch t := t.(type) {
		case *etree.Element:
			elements++
		case *etree.CharData:
			if !isBlank(t) {
				return fmt.Errorf("text outside the root element")
			}
		}
	}
	if elements != 1 {
		return fmt.Errorf("the document has %d root elements, want 1", elements)
	}
	if root := doc.Root(); root.Space != "" || root.Tag != "domain" {
		return fmt.Errorf("the root element is <%s>, not <domain>", root.FullTag())
	}
	return nil
}

// writeStyle returns etree settings that write XML the way domainXML is
// written: explicit end tags (<x></x>, KubeVirt's encoding/xml output) unless
// the input has self-closing tags (virsh dumpxml), and the quote character of
// the root element's first attribute (" by default, ' for libvirt's output).
func writeStyle(domainXML []byte) etree.WriteSettings {
	s := etree.WriteSettings{CanonicalEndTags: !bytes.Contains(domainXML, []byte("/>"))}
	if i := bytes.Index(domainXML, []byte("<domain")); i >= 0 {
		tag := domainXML[i:]
		if end := bytes.IndexByte(tag, '>'); end >= 0 {
			tag = tag[:end]
		}
		if eq := bytes.IndexByte(tag, '='); eq >= 0 {
			s.AttrSingleQuote = bytes.HasPrefix(bytes.TrimLeft(tag[eq+1:], " \t\r\n"), []byte("'"))
		}
	}
	return s
}

// validateForVhost checks a with tuning's limits and the vhost-net limit on
// the tx ring.
func validateForVhost(a domaintuning.Annotation) error {
	if err := a.Validate(); err != nil {
		return fmt.Errorf("failed to validate tuning annotation %s: %w", domaintuning.AnnotationKey, err)
	}
	for _, network := range sortedNetworks(a) {
		if tx := a.Interfaces[network].TxQueueSize; tx != 0 && tx != VhostTxQueueSize {
			return fmt.Errorf("failed to validate tuning annotation %s: interfaces[%q].txQueueSize %d is invalid: must be %d with the vhost driver (larger tx rings need vhost-user)",
				domaintuning.AnnotationKey, network, tx, VhostTxQueueSize)
		}
	}
	return nil
}

func sortedNetworks(a domaintuning.Annotation) []string {
	names := make([]string, 0, len(a.Interfaces))
	for n := range a.Interfaces {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// domainVCPUs returns the vCPUs the domain starts with: <vcpu current='N'>
// when set, else the <vcpu> text, else libvirt's default of 1.
func domainVCPUs(root *etree.Element) (int, error) {
	el := root.SelectElement("vcpu")
	if el == nil {
		return defaultVCPUs, nil
	}
	value := strings.TrimSpace(el.SelectAttrValue("current", el.Text()))
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("failed to read the vCPU count of the domain %q: not a positive integer", value)
	}
	return n, nil
}

// editor applies tunings and records what it did.
type editor struct {
	changes  []Change
	warnings []string
}

func (ed *editor) warnf(format string, args ...any) {
	ed.warnings = append(ed.warnings, fmt.Sprintf(format, args...))
}

// set sets attr of el (at path below <interface>) to value, recording a Change
// when it differs. An existing attribute keeps its position.
func (ed *editor) set(network string, el *etree.Element, path, attr, value string) {
	from := ""
	if old := el.SelectAttr(attr); old != nil {
		if old.Value == value {
			return
		}
		from = old.Value
	}
	el.CreateAttr(attr, value)
	ed.changes = append(ed.changes, Change{Network: network, Element: path, Attr: attr, From: from, To: value})
}

// tuneInterface applies t to one <interface> element.
func (ed *editor) tuneInterface(iface *etree.Element, network string, t domaintuning.Interface, vcpus int) error {
	alias := AliasPrefix + network
	field := fmt.Sprintf("interfaces[%q]", network)
	if t.Queues != 0 || t.RxQueueSize != 0 || t.TxQueueSize != 0 || t.Offloads != (domaintuning.Offloads{}) {
		model := ""
		if el := iface.SelectElement("model"); el != nil {
			model = el.SelectAttrValue("type", "")
		}
		if !strings.HasPrefix(model, "virtio") {
			return fmt.Errorf("failed to tune interface %s: its model %q is not virtio, and %s sets virtio driver options", alias, model, field)
		}
		driver := childOrNew(iface, "driver")
		if name := driver.SelectAttrValue("name", ""); name != "" && name != "vhost" {
			ed.warnf("Interface %s: driver name %q replaced by \"vhost\"; libvirt refuses to start the domain if /dev/vhost-net is missing", alias, name)
		}
		ed.set(network, driver, "driver", "name", "vhost")
		if t.Queues != 0 {
			queues := int(t.Queues)
			if queues > vcpus {
				ed.warnf("Interface %s: %s.queues %d capped at the domain's %d vCPUs", alias, field, queues, vcpus)
				queues = vcpus
			}
			ed.set(network, driver, "driver", "queues", strconv.Itoa(queues))
		}
		if t.RxQueueSize != 0 {
			ed.set(network, driver, "driver", "rx_queue_size", strconv.Itoa(int(t.RxQueueSize)))
		}
		if t.TxQueueSize != 0 {
			ed.set(network, driver, "driver", "tx_queue_size", strconv.Itoa(int(t.TxQueueSize)))
		}
		for _, s := range offloadSettings(t.Offloads) {
			ed.set(network, childOrNew(driver, s.Target.Elem), "driver/"+s.Target.Elem, s.Target.Attr, s.Value)
		}
		ed.warnOffloadDependencies(alias, field, t.Offloads)
	}
	if t.MTU != 0 {
		mtu := int(t.MTU)
		el := iface.SelectElement("mtu")
		if el != nil {
			if pod, err := strconv.Atoi(el.SelectAttrValue("size", "")); err == nil && pod > 0 && pod < mtu {
				ed.warnf("Interface %s: %s.mtu %d lowered to %d, the MTU KubeVirt copied from the pod interface; the tap device would drop larger frames",
					alias, field, mtu, pod)
				mtu = pod
			}
		} else {
			el = childOrNew(iface, "mtu")
		}
		ed.set(network, el, "mtu", "size", strconv.Itoa(mtu))
	}
	return nil
}

// warnOffloadDependencies reports offload combinations the virtio feature
// rules (virtio 1.2 §5.1.3.1) make ineffective in the guest: an attribute
// set on whose virtioNeeds attribute another offload sets off, e.g.
// "offloads.tso On has no effect with txChecksum Off (virtio: HOST_TSO4,
// HOST_TSO6, HOST_ECN need CSUM)", one warning per pair of offloads in
// wellknown.Offloads order. The pairs come from the table's Host and Guest
// attributes, so a new offload row needs no line here. Unset offloads are
// left to QEMU (on) and never warned about.
func (ed *editor) warnOffloadDependencies(alias, field string, o domaintuning.Offloads) {
	settings := offloadSettings(o)
	byTarget := map[offloadTarget]offloadSetting{}
	for _, s := range settings {
		byTarget[s.Target] = s
	}
	type pair struct{ offload, needs string }
	bits := map[pair][]string{}
	needBit := map[pair]string{}
	for _, s := range settings {
		need, ok := virtioNeeds[s.Target]
		if !ok || s.Value != "on" {
			continue
		}
		if n, ok := byTarget[need]; ok && n.Value == "off" && n.Offload != s.Offload {
			p := pair{s.Offload, n.Offload}
			bits[p] = append(bits[p], virtioFeature[s.Target])
			needBit[p] = virtioFeature[need]
		}
	}
	names := wellknown.OffloadNames()
	pairs := make([]pair, 0, len(bits))
	for p := range bits {
		pairs = append(pairs, p)
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := slices.Index(names, a.offload) - slices.Index(names, b.offload); c != 0 {
			return c
		}
		return slices.Index(names, a.needs) - slices.Index(names, b.needs)
	})
	for _, p := range pairs {
		verb := "needs"
		if len(bits[p]) > 1 {
			verb = "need"
		}
		ed.warnf("Interface %s: %s.offloads.%s On has no effect with %s Off (virtio: %s %s %s)",
			alias, field, p.offload, p.needs, strings.Join(bits[p], ", "), verb, needBit[p])
	}
	if o.GSO == v1alpha1.OffloadOn && o.TSO == v1alpha1.OffloadOff {
		ed.warnf("Interface %s: %s.offloads.gso On with tso Off lets a legacy (transitional) virtio driver use TSO through the GSO bit", alias, field)
	}
}

package domainhook

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Names of the vhost-user-vsock device the hook adds in vsock mode Sibling.
const (
	// QEMUNamespace is libvirt's namespace of <qemu:commandline>
	// (docs/drvqemu.html "Pass-through of arbitrary qemu commands").
	QEMUNamespace = "http://libvirt.org/schemas/domain/qemu/1.0"
	// SiblingChardevID is the QEMU chardev of the vhost-user socket.
	SiblingChardevID = "fpvsock0"
	// SiblingSocketDirEnv overrides v1alpha1.SiblingSocketDir for the hook
	// (set on the sidecar container; the local environment points it at the
	// agent's socket directory).
	SiblingSocketDirEnv = "FASTPATH_SIBLING_SOCKET_DIR"
)

// SiblingSocket returns the vhost-user socket of VM namespace/name: the base
// name of v1alpha1.SiblingSocketPath in $FASTPATH_SIBLING_SOCKET_DIR, or
// v1alpha1.SiblingSocketPath itself when the variable is unset.
func SiblingSocket(namespace, name string) string {
	p := v1alpha1.SiblingSocketPath(namespace, name)
	if dir := os.Getenv(SiblingSocketDirEnv); dir != "" {
		return filepath.Join(dir, filepath.Base(p))
	}
	return p
}

// ApplySibling gives the domain the vsock device of mode Sibling: it removes
// KubeVirt's kernel <vsock> (vhost-vsock) when there is one, adds
// <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>
// (vhost-user maps the guest's memory into the backend, which needs shared,
// fd-backed memory) and a vhost-user-vsock-pci device on socket. libvirt 9.0
// has no element for a vhost-user vsock device (its <vsock> schema has only
// model, cid, address and alias), so the device is two QEMU arguments in
// <qemu:commandline>:
//
//	-chardev socket,id=fpvsock0,path=<socket>
//	-device vhost-user-vsock-pci,chardev=fpvsock0
//
// On q35 (a <controller type='pci' model='pcie-root'/> or a q35 machine)
// the device gets ",bus=pcie.0,addr=<slot>": QEMU sees the qemu:commandline
// arguments before libvirt's own -device list and would otherwise put it in
// slot 1, where libvirt places its first pcie-root-port; the slot is the
// first of 0x10-0x18 that no explicit address of the domain uses (libvirt
// fills root ports upwards from slot 1 and ICH9 functions sit at 0x1a-0x1f).
// Elsewhere QEMU picks a free slot of the default bus. It is
// idempotent: a domain that already has the chardev is returned unchanged.
// Errors: socket not absolute or containing ','; the document is not a
// <domain>; a memoryBacking with another source type or access mode (the
// user's hugepages, say) that vhost-user cannot share.
func ApplySibling(domainXML []byte, socket string) (Result, error) {
	if !filepath.IsAbs(socket) || strings.Contains(socket, ",") {
		return Result{}, fmt.Errorf("failed to add the vhost-user vsock device: socket %q must be an absolute path without ','", socket)
	}
	doc := etree.NewDocument()
	doc.ReadSettings = etree.ReadSettings{PreserveCData: true, PreserveDuplicateAttrs: true}
	doc.WriteSettings = writeStyle(domainXML)
	if err := doc.ReadFromBytes(domainXML); err != nil {
		return Result{}, fmt.Errorf("failed to parse domain XML: %w", err)
	}
	if err := checkDocument(doc); err != nil {
		return Result{}, fmt.Errorf("failed to parse domain XML: %w", err)
	}
	root := doc.Root()
	chardev := "socket,id=" + SiblingChardevID + ",path=" + socket
	if cl := root.SelectElement("qemu:commandline"); cl != nil {
		for _, a := range cl.SelectElements("qemu:arg") {
			if a.SelectAttrValue("value", "") == chardev {
				return Result{Domain: domainXML}, nil
			}
		}
	}
	var changes []Change
	if mb := root.SelectElement("memoryBacking"); mb != nil {
		if s := mb.SelectElement("source"); s != nil && s.SelectAttrValue("type", "") != "memfd" {
			return Result{}, fmt.Errorf("failed to add the vhost-user vsock device: memoryBacking source type %q, vhost-user needs memfd", s.SelectAttrValue("type", ""))
		}
		if a := mb.SelectElement("access"); a != nil && a.SelectAttrValue("mode", "") != "shared" {
			return Result{}, fmt.Errorf("failed to add the vhost-user vsock device: memoryBacking access mode %q, vhost-user needs shared", a.SelectAttrValue("mode", ""))
		}
		if mb.SelectElement("source") == nil {
			addIndented(mb, etree.NewElement("source")).CreateAttr("type", "memfd")
			changes = append(changes, Change{Element: "memoryBacking/source", Attr: "type", To: "memfd"})
		}
		if mb.SelectElement("access") == nil {
			addIndented(mb, etree.NewElement("access")).CreateAttr("mode", "shared")
			changes = append(changes, Change{Element: "memoryBacking/access", Attr: "mode", To: "shared"})
		}
	} else {
		mb := etree.NewElement("memoryBacking")
		insertIndented(root, mb, indexAfterAny(root, "currentMemory", "memory"))
		addIndented(mb, etree.NewElement("source")).CreateAttr("type", "memfd")
		addIndented(mb, etree.NewElement("access")).CreateAttr("mode", "shared")
		changes = append(changes, Change{Element: "memoryBacking/source", Attr: "type", To: "memfd"},
			Change{Element: "memoryBacking/access", Attr: "mode", To: "shared"})
	}
	if devices := root.SelectElement("devices"); devices != nil {
		if v := devices.SelectElement("vsock"); v != nil {
			cid := ""
			if c := v.SelectElement("cid"); c != nil {
				cid = c.SelectAttrValue("address", "")
			}
			removeIndented(devices, v)
			changes = append(changes, Change{Element: "devices/vsock", Attr: "cid", From: cid, To: "removed (kernel vhost-vsock replaced by vhost-user)"})
		}
	}
	if root.SelectAttr("xmlns:qemu") == nil {
		root.CreateAttr("xmlns:qemu", QEMUNamespace)
	}
	cl := root.SelectElement("qemu:commandline")
	if cl == nil {
		cl = addIndented(root, etree.NewElement("qemu:commandline"))
	}
	device := "vhost-user-vsock-pci,chardev=" + SiblingChardevID
	if slot := freeRootSlot(root); slot != "" {
		device += ",bus=pcie.0,addr=" + slot
	}
	for _, a := range []string{"-chardev", chardev, "-device", device} {
		addIndented(cl, etree.NewElement("qemu:arg")).CreateAttr("value", a)
	}
	changes = append(changes, Change{Element: "qemu:commandline", Attr: "arg", To: "-device vhost-user-vsock-pci on " + socket})
	out, err := doc.WriteToBytes()
	if err != nil {
		return Result{}, fmt.Errorf("failed to write domain XML: %w", err)
	}
	return Result{Domain: out, Changes: changes}, nil
}

// indexAfterAny returns the child index just after the first of tags found
// in parent, else the end.
func indexAfterAny(parent *etree.Element, tags ...string) int {
	for _, tag := range tags {
		if el := parent.SelectElement(tag); el != nil {
			return el.Index() + 1
		}
	}
	return len(parent.Child)
}

// freeRootSlot returns the first PCI slot of 0x10-0x18 on bus 0 that no
// <address type='pci' bus='0x00'> of the domain uses, "" when the machine is
// not q35 or every one is taken.
func freeRootSlot(root *etree.Element) string {
	q35 := false
	if t := root.FindElement("os/type"); t != nil && strings.Contains(t.SelectAttrValue("machine", ""), "q35") {
		q35 = true
	}
	used := map[int64]bool{}
	for _, a := range root.FindElements("devices//address") {
		if a.SelectAttrValue("type", "") != "pci" {
			continue
		}
		if bus, err := strconv.ParseInt(a.SelectAttrValue("bus", "0"), 0, 64); err != nil || bus != 0 {
			continue
		}
		if slot, err := strconv.ParseInt(a.SelectAttrValue("slot", ""), 0, 64); err == nil {
			used[slot] = true
		}
	}
	for _, c := range root.FindElements("devices/controller") {
		if c.SelectAttrValue("type", "") == "pci" && c.SelectAttrValue("model", "") == "pcie-root" {
			q35 = true
		}
	}
	if !q35 {
		return ""
	}
	for slot := int64(0x10); slot <= 0x18; slot++ {
		if !used[slot] {
			return fmt.Sprintf("0x%02x", slot)
		}
	}
	return ""
}

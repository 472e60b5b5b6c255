package guests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"

	"github.com/beevik/etree"
)

// DomainSpec is what the emulated virt-launcher knows when it converts a VMI
// into a libvirt domain.
type DomainSpec struct {
	// Namespace and Name of the VMI; the domain is "<namespace>_<name>" as
	// KubeVirt names it.
	Namespace, Name string
	// UID is the VMI's UID (a UUID), kept in the domain metadata and the
	// SMBIOS system UUID.
	UID string
	// MemoryMiB is the guest memory in MiB (1 MiB-1 TiB).
	MemoryMiB int
	// VCPUs is the number of vCPUs (1-64); virtio-net queues are capped by it.
	VCPUs int
	// Kernel, Initrd and Cmdline are the direct kernel boot of the guest
	// image (KubeVirt's kernelBoot; the image comes from hack/guest-image.sh).
	Kernel, Initrd, Cmdline string
	// Interfaces are the VMI's interfaces in spec order.
	Interfaces []DomainInterface
	// ConsoleLog is the file serial0 (the guest's console) is written to.
	ConsoleLog string
	// ControlSocket is the UNIX socket of the virtio-serial port
	// ControlPortName, the local environment's control channel into the
	// guest (not part of a KubeVirt domain).
	ControlSocket string
	// VSOCKCID is the guest's vsock CID (autoattachVSOCK); 0 for no vsock.
	VSOCKCID uint32
	// Multiqueue is the VMI's networkInterfaceMultiqueue: every interface
	// gets <driver name="vhost" queues="<VCPUs>"/>, as KubeVirt's converter
	// sets it (and virt-launcher makes multi-queue taps).
	Multiqueue bool
	// Emulator is the QEMU binary; "" means /usr/bin/qemu-system-x86_64.
	Emulator string
}

// DomainInterface is one VMI interface as KubeVirt's converter renders it.
type DomainInterface struct {
	// Network is the VMI network name; the alias is "ua-<Network>".
	Network string
	// Tap is the tap device in the launcher namespace (tap0 for the
	// masquerade binding, tap<hash> for the bridge binding).
	Tap string
	// MAC is the guest NIC's MAC address.
	MAC string
	// MTU is the pod interface's MTU, which the guest adopts via host_mtu.
	MTU int
}

// Validate reports the first invalid field of s.
func (s DomainSpec) Validate() error {
	switch {
	case s.Namespace == "" || s.Name == "":
		return fmt.Errorf("invalid domain spec: namespace and name are required")
	case s.MemoryMiB < 1 || s.MemoryMiB > 1<<20:
		return fmt.Errorf("invalid domain spec %s/%s: memoryMiB %d must be 1-%d", s.Namespace, s.Name, s.MemoryMiB, 1<<20)
	case s.VCPUs < 1 || s.VCPUs > 64:
		return fmt.Errorf("invalid domain spec %s/%s: vcpus %d must be 1-64", s.Namespace, s.Name, s.VCPUs)
	case !uuidPattern.MatchString(s.UID):
		return fmt.Errorf("invalid domain spec %s/%s: uid %q must be a UUID (a VMI's metadata.uid)", s.Namespace, s.Name, s.UID)
	case s.Kernel == "" || s.Initrd == "":
		return fmt.Errorf("invalid domain spec %s/%s: kernel and initrd are required", s.Namespace, s.Name)
	}
	for i, iface := range s.Interfaces {
		if iface.Network == "" || iface.Tap == "" || len(iface.Tap) > 15 || iface.MAC == "" {
			return fmt.Errorf("invalid domain spec %s/%s: interfaces[%d] needs network, tap (1-15 characters) and mac", s.Namespace, s.Name, i)
		}
		if iface.MTU < 68 || iface.MTU > 65535 {
			return fmt.Errorf("invalid domain spec %s/%s: interfaces[%d].mtu %d must be 68-65535", s.Namespace, s.Name, i, iface.MTU)
		}
	}
	return nil
}

// ControlPortName is the name of the control channel's virtio-serial port;
// the guest (hack/guest/init) finds its /dev/vportNpM by this name in
// /sys/class/virtio-ports/*/name.
const ControlPortName = "io.fastpath.control.0"

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// DomainName is KubeVirt's libvirt domain name of a VMI: "<namespace>_<name>".
func DomainName(namespace, name string) string { return namespace + "_" + name }

// domainTemplate follows what KubeVirt v1.6's converter
// (pkg/virt-launcher/virtwrap/converter) emits for a VMI with a masquerade
// pod network and bridge-bound Multus networks: interface type='ethernet'
// with the launcher's tap (managed='no'), model virtio-non-transitional,
// alias ua-<network>, the pod interface's MTU, ROM off, and with
// networkInterfaceMultiqueue a vhost driver with one queue pair per vCPU; a virtio-serial
// controller, no USB, a vsock device with a fixed CID when autoattachVSOCK
// is set, a memballoon, q35. Deviations, all of the local environment: the
// domain type is 'qemu' (TCG), the guest boots a kernel directly, serial0
// writes to a file (KubeVirt uses a UNIX socket with a log) and a
// virtio-serial port (ControlPortName) on the domain's virtio-serial
// controller is a control channel. It is a virtio port, not a second UART:
// the port has flow control (QEMU reads the host's bytes only into buffers
// the guest posted, and only while the guest holds the port open), where a
// 16550 under TCG lost bytes of long command lines
// (docs/vsock-sibling.md).
var domainTemplate = template.Must(template.New("domain").Parse(`<domain type="qemu" xmlns:qemu="http://libvirt.org/schemas/domain/qemu/1.0">
  <name>{{.DomainName}}</name>
  <memory unit="b">{{.MemoryBytes}}</memory>
  <os>
    <type arch="x86_64" machine="q35">hvm</type>
    <kernel>{{.Kernel}}</kernel>
    <initrd>{{.Initrd}}</initrd>
    <cmdline>{{.Cmdline}}</cmdline>
  </os>
  <sysinfo type="smbios">
    <system>
      <entry name="manufacturer">KubeVirt</entry>
      <entry name="product">None</entry>
      <entry name="uuid">{{.UID}}</entry>
      <entry name="family">KubeVirt</entry>
    </system>
  </sysinfo>
  <devices>
    <emulator>{{.Emulator}}</emulator>
{{- range .Interfaces}}
    <interface type="ethernet">
      <source></source>
      <target dev="{{.Tap}}" managed="no"></target>
      <model type="virtio-non-transitional"></model>
{{- if $.Multiqueue}}
      <driver name="vhost" queues="{{$.VCPUs}}"></driver>
{{- end}}
      <mac address="{{.MAC}}"></mac>
      <mtu size="{{.MTU}}"></mtu>
      <alias name="ua-{{.Network}}"></alias>
      <rom enabled="no"></rom>
    </interface>
{{- end}}
    <controller type="usb" index="0" model="none"></controller>
    <controller type="virtio-serial" index="0" model="virtio-non-transitional"></controller>
    <serial type="file">
      <source path="{{.ConsoleLog}}"></source>
      <target port="0"></target>
    </serial>
{{- if .ControlSocket}}
    <channel type="unix">
      <source mode="bind" path="{{.ControlSocket}}"></source>
      <target type="virtio" name="{{.ControlPortName}}"></target>
    </channel>
{{- end}}
{{- if .VSOCKCID}}
    <vsock model="virtio-non-transitional">
      <cid auto="no" address="{{.VSOCKCID}}"></cid>
    </vsock>
{{- end}}
    <memballoon model="virtio-non-transitional"></memballoon>
  </devices>
  <metadata>
    <kubevirt xmlns="http://kubevirt.io">
      <uid>{{.UID}}</uid>
    </kubevirt>
  </metadata>
  <features>
    <acpi></acpi>
  </features>
  <cpu mode="custom">
    <model fallback="allow">qemu64</model>
    <topology sockets="1" dies="1" cores="{{.VCPUs}}" threads="1"></topology>
  </cpu>
  <vcpu placement="static">{{.VCPUs}}</vcpu>
</domain>
`))

// ConvertDomain renders the domain XML of s (see domainTemplate for its
// shape). Errors: an invalid spec.
func ConvertDomain(s DomainSpec) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Emulator == "" {
		s.Emulator = "/usr/bin/qemu-system-x86_64"
	}
	data := struct {
		DomainSpec
		DomainName      string
		MemoryBytes     int64
		ControlPortName string
	}{s, DomainName(s.Namespace, s.Name), int64(s.MemoryMiB) << 20, ControlPortName}
	var buf bytes.Buffer
	if err := domainTemplate.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("failed to render the domain of %s/%s: %w", s.Namespace, s.Name, err)
	}
	return buf.Bytes(), nil
}

// RunHook calls the domain hook binary exactly as KubeVirt's sidecar-shim
// does (cmd/sidecars/sidecar_shim.go): an executable named onDefineDomain
// with `--vmi <VMI JSON> --domain <domain XML>`, the new domain on stdout.
// hookBin is linked as <dir>/onDefineDomain; env ("KEY=value") is added to
// this process's environment for it, as the sidecar container's env would
// be. It returns the new domain and what the hook wrote on stderr; a
// non-zero exit is an error carrying stderr.
func RunHook(hookBin, dir string, vmiJSON, domainXML []byte, env ...string) (domain []byte, stderr string, err error) {
	abs, err := filepath.Abs(hookBin)
	if err != nil {
		return nil, "", fmt.Errorf("failed to resolve the domain hook %s: %w", hookBin, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, "", fmt.Errorf("failed to find the domain hook %s (make build): %w", abs, err)
	}
	link := filepath.Join(dir, "onDefineDomain")
	_ = os.Remove(link)
	if err := os.Symlink(abs, link); err != nil {
		return nil, "", fmt.Errorf("failed to link %s: %w", link, err)
	}
	cmd := exec.Command(link, "--vmi", string(vmiJSON), "--domain", string(domainXML))
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, errb.String(), fmt.Errorf("domain hook onDefineDomain failed: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), errb.String(), nil
}

// ValidateDomain checks domainXML against libvirt's schema with
// virt-xml-validate (Debian libvirt-clients). The error carries its output.
func ValidateDomain(dir string, domainXML []byte) error {
	f := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(f, domainXML, 0o600); err != nil {
		return fmt.Errorf("failed to write %s: %w", f, err)
	}
	out, err := exec.Command("virt-xml-validate", f, "domain").CombinedOutput()
	if err != nil {
		return fmt.Errorf("domain %s does not validate against libvirt's schema: %w: %s", f, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NodeAdjustment is one change the emulated node makes to the hooked
// domain because this machine lacks what a KubeVirt node has; each is
// printed, labelled EMULATED.
type NodeAdjustment struct {
	// What says what changed and why.
	What string
}

// NodeCapabilities say what the host kernel offers the guests.
type NodeCapabilities struct {
	// VhostNet is true when /dev/vhost-net exists.
	VhostNet bool
	// VhostVsock is true when /dev/vhost-vsock exists.
	VhostVsock bool
}

// ProbeNode reads the host's vhost devices.
func ProbeNode() NodeCapabilities {
	_, errNet := os.Stat("/dev/vhost-net")
	_, errVsock := os.Stat("/dev/vhost-vsock")
	return NodeCapabilities{VhostNet: errNet == nil, VhostVsock: errVsock == nil}
}

// AdjustForNode adapts the hooked domain to this machine, after the hook
// and before libvirt defines it:
//   - without /dev/vhost-net, libvirt refuses an interface whose driver
//     name is 'vhost' (qemuInterfaceOpenVhostNet); it becomes 'qemu'
//     (QEMU's userspace virtio-net on the same tap). Queues, ring sizes,
//     offloads and MTU stay as the hook set them.
//   - a kernel <vsock> device (vhost-vsock) is replaced by a
//     vhost-user-vsock-pci device on vhostUserSocket (served by
//     vhost-device-vsock) with the shared memfd memory vhost-user needs;
//     libvirt 9.0 has no element for it, so it goes in qemu:commandline.
//     A domain without <vsock> (or a hook that already replaced it) is left
//     alone.
//
// It returns the new XML and the adjustments made.
func AdjustForNode(domainXML []byte, caps NodeCapabilities, vhostUserSocket string) ([]byte, []NodeAdjustment, error) {
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(domainXML); err != nil {
		return nil, nil, fmt.Errorf("failed to parse the hooked domain: %w", err)
	}
	root := doc.SelectElement("domain")
	if root == nil {
		return nil, nil, fmt.Errorf("failed to parse the hooked domain: no <domain> element")
	}
	var adj []NodeAdjustment
	devices := root.SelectElement("devices")
	if devices == nil {
		return nil, nil, fmt.Errorf("failed to parse the hooked domain: no <devices> element")
	}
	if !caps.VhostNet {
		for _, iface := range devices.SelectElements("interface") {
			d := iface.SelectElement("driver")
			if d == nil || d.SelectAttrValue("name", "") != "vhost" {
				continue
			}
			d.CreateAttr("name", "qemu")
			alias := ""
			if a := iface.SelectElement("alias"); a != nil {
				alias = a.SelectAttrValue("name", "")
			}
			adj = append(adj, NodeAdjustment{What: fmt.Sprintf("interface %s: driver name vhost -> qemu (this kernel has no vhost-net; QEMU's userspace virtio-net on the same tap, queues/rings/offloads/MTU as the hook set them)", alias)})
		}
	}
	if v := devices.SelectElement("vsock"); v != nil && !caps.VhostVsock {
		if vhostUserSocket == "" {
			return nil, nil, fmt.Errorf("failed to adapt the domain: it has a <vsock> device, this node has no vhost-vsock and no vhost-user-vsock backend socket was given")
		}
		devices.RemoveChild(v)
		if root.SelectElement("memoryBacking") == nil {
			mb := etree.NewElement("memoryBacking")
			mb.CreateElement("source").CreateAttr("type", "memfd")
			mb.CreateElement("access").CreateAttr("mode", "shared")
			root.InsertChildAt(indexAfter(root, "memory"), mb)
		}
		if root.SelectAttr("xmlns:qemu") == nil {
			root.CreateAttr("xmlns:qemu", "http://libvirt.org/schemas/domain/qemu/1.0")
		}
		cl := root.SelectElement("qemu:commandline")
		if cl == nil {
			cl = root.CreateElement("qemu:commandline")
		}
		for _, a := range []string{"-chardev", "socket,id=fpvsock0,path=" + vhostUserSocket,
			"-device", "vhost-user-vsock-pci,chardev=fpvsock0,bus=pcie.0,addr=0x10"} {
			cl.CreateElement("qemu:arg").CreateAttr("value", a)
		}
		adj = append(adj, NodeAdjustment{What: "vsock: kernel <vsock> (vhost-vsock, missing here) -> vhost-user-vsock-pci on " + vhostUserSocket + " (vhost-device-vsock), memfd shared memory; libvirt 9.0 has no element for it, so qemu:commandline"})
	}
	if len(adj) == 0 {
		return domainXML, nil, nil
	}
	doc.Indent(2)
	out, err := doc.WriteToBytes()
	if err != nil {
		return nil, nil, fmt.Errorf("failed to write the adapted domain: %w", err)
	}
	return out, adj, nil
}

// indexAfter returns the child index just after the first child element
// named tag (0 when there is none).
func indexAfter(parent *etree.Element, tag string) int {
	for i, c := range parent.Child {
		if e, ok := c.(*etree.Element); ok && e.Tag == tag {
			return i + 1
		}
	}
	return 0
}

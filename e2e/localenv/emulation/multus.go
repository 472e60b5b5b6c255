package emulation

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// attachedNet is one Multus network of a launcher, wired by a CNI ADD.
type attachedNet struct {
	// network is the VMI network name; podIf the pod interface (CNI_IFNAME)
	// in the launcher; guestIf the guest's interface of the bridge binding.
	network, podIf, guestIf string
	// nad is "<namespace>/<name>" of the NetworkAttachmentDefinition.
	nad string
	// plugin is the CNI type (for printing).
	plugin string
	// conf or list is what ADD ran (DEL runs the same).
	conf *libcni.PluginConfig
	list *libcni.NetworkConfigList
	rt   *libcni.RuntimeConf
	// mac and ips are the pod interface's, from the CNI result.
	mac string
	ips []string
}

// nadRef splits a Multus networkName, "name" or "namespace/name", defaulting
// the namespace to the VMI's (Multus's rule for network selection elements).
func nadRef(networkName, vmiNamespace string) types.NamespacedName {
	if ns, name, ok := strings.Cut(networkName, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: name}
	}
	return types.NamespacedName{Namespace: vmiNamespace, Name: networkName}
}

// multusNetworks returns the VMI's secondary Multus networks (not the
// default one, which replaces the pod network), in spec order.
func multusNetworks(vmi *kubevirtv1.VirtualMachineInstance) []kubevirtv1.Network {
	var out []kubevirtv1.Network
	for _, n := range vmi.Spec.Networks {
		if n.Multus != nil && !n.Multus.Default {
			out = append(out, n)
		}
	}
	return out
}

// specInterface returns the VMI interface of a network, or nil.
func specInterface(vmi *kubevirtv1.VirtualMachineInstance, network string) *kubevirtv1.Interface {
	for i := range vmi.Spec.Domain.Devices.Interfaces {
		if vmi.Spec.Domain.Devices.Interfaces[i].Name == network {
			return &vmi.Spec.Domain.Devices.Interfaces[i]
		}
	}
	return nil
}

// cniAdd does what Multus does for one network selection element of a
// virt-launcher pod: it reads the NetworkAttachmentDefinition's spec.config
// from the API server and executes the CNI plugin it names (the real binary,
// found in CNIPath) through libcni, which also injects the runtimeConfig of
// the capabilities the config declares (Multus passes the interface MAC as
// the "mac" capability). CNI_ARGS carry the pod identity as Multus sets them.
func (e *Emulator) cniAdd(ctx context.Context, l *launcher, vmi *kubevirtv1.VirtualMachineInstance, n kubevirtv1.Network) (*attachedNet, error) {
	ref := nadRef(n.Multus.NetworkName, vmi.Namespace)
	nad := &nadv1.NetworkAttachmentDefinition{}
	if err := e.reader.Get(ctx, ref, nad); err != nil {
		return nil, fmt.Errorf("failed to get NetworkAttachmentDefinition %s for network %s (Multus keeps the pod in ContainerCreating): %w", ref, n.Name, err)
	}
	if strings.TrimSpace(nad.Spec.Config) == "" {
		return nil, fmt.Errorf("failed to use NetworkAttachmentDefinition %s: spec.config is empty (on-disk configurations are not emulated)", ref)
	}
	a := &attachedNet{network: n.Name, podIf: PodInterfaceName(n.Name), nad: ref.String()}
	a.rt = &libcni.RuntimeConf{
		ContainerID: l.containerID,
		NetNS:       l.netns.Path,
		IfName:      a.podIf,
		Args: [][2]string{
			{"IgnoreUnknown", "true"},
			{"K8S_POD_NAMESPACE", vmi.Namespace},
			{"K8S_POD_NAME", l.podName},
			{"K8S_POD_INFRA_CONTAINER_ID", l.containerID},
			{"K8S_POD_UID", string(l.podUID)},
		},
		CapabilityArgs: map[string]any{},
	}
	if iface := specInterface(vmi, n.Name); iface != nil && iface.MacAddress != "" {
		a.rt.CapabilityArgs["mac"] = iface.MacAddress
	}
	raw := []byte(nad.Spec.Config)
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("failed to parse spec.config of NetworkAttachmentDefinition %s: %w", ref, err)
	}
	var (
		res cnitypes.Result
		err error
	)
	if _, isList := probe["plugins"]; isList {
		if a.list, err = libcni.NetworkConfFromBytes(raw); err != nil {
			return nil, fmt.Errorf("failed to load the CNI configuration list of %s: %w", ref, err)
		}
		if len(a.list.Plugins) > 0 {
			a.plugin = a.list.Plugins[0].Network.Type
		}
		res, err = e.cni.AddNetworkList(ctx, a.list, a.rt)
	} else {
		if a.conf, err = libcni.NetworkPluginConfFromBytes(raw); err != nil {
			return nil, fmt.Errorf("failed to load the CNI configuration of %s: %w", ref, err)
		}
		a.plugin = a.conf.Network.Type
		res, err = e.cni.AddNetwork(ctx, a.conf, a.rt)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to run CNI ADD of %s (plugin %s, CNI_IFNAME %s, CNI_NETNS %s): %w", ref, a.plugin, a.podIf, l.netns.Path, err)
	}
	if err := a.readResult(res, l.netns.Path); err != nil {
		_ = e.cniDel(context.WithoutCancel(ctx), a)
		return nil, fmt.Errorf("failed to read the CNI result of %s: %w", ref, err)
	}
	e.log.printf("multus", "CNI ADD %s for pod %s/%s: plugin %q from NetworkAttachmentDefinition %s, CNI_IFNAME=%s CNI_NETNS=%s -> %s mac %s",
		n.Name, vmi.Namespace, l.podName, a.plugin, ref, a.podIf, l.netns.Path, strings.Join(a.ips, ","), a.mac)
	return a, nil
}

// readResult takes the MAC and addresses of the pod interface from a CNI result.
func (a *attachedNet) readResult(res cnitypes.Result, netnsPath string) error {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return fmt.Errorf("failed to convert the CNI result: %w", err)
	}
	idx := -1
	for i, itf := range r.Interfaces {
		if itf.Name == a.podIf && (itf.Sandbox == "" || itf.Sandbox == netnsPath) {
			idx = i
			a.mac = itf.Mac
		}
	}
	if idx < 0 {
		return fmt.Errorf("the result has no interface %s in %s", a.podIf, netnsPath)
	}
	for _, ip := range r.IPs {
		if ip.Interface == nil || *ip.Interface == idx {
			a.ips = append(a.ips, ip.Address.IP.String())
		}
	}
	if len(a.ips) == 0 {
		return fmt.Errorf("the result has no address for interface %s", a.podIf)
	}
	if _, err := net.ParseMAC(a.mac); err != nil {
		return fmt.Errorf("the result's MAC %q of interface %s is invalid: %w", a.mac, a.podIf, err)
	}
	return nil
}

// cniDel runs CNI DEL with what ADD ran (Multus replays the same delegate).
func (e *Emulator) cniDel(ctx context.Context, a *attachedNet) error {
	var err error
	if a.list != nil {
		err = e.cni.DelNetworkList(ctx, a.list, a.rt)
	} else {
		err = e.cni.DelNetwork(ctx, a.conf, a.rt)
	}
	if err != nil {
		return fmt.Errorf("failed to run CNI DEL of %s (CNI_IFNAME %s): %w", a.nad, a.podIf, err)
	}
	e.log.printf("multus", "CNI DEL %s (%s, CNI_IFNAME=%s)", a.network, a.nad, a.podIf)
	return nil
}

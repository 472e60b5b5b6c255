package benchjob

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// PodNetworkInterface is the name of KubeVirt's default (pod network) VM
// interface in the samples and in most VMs (`networks: [{name: default, pod: {}}]`).
const PodNetworkInterface = "default"

// NetworkAttachmentRef returns the NAD of the attachment name in namespace as
// "<namespace>/<name>": statusNAD (the attachment's
// status.networkAttachmentDefinition, "<namespace>/<name>" or "<name>") when
// set, else the attachment's own name (the attachment controller names the NAD
// after the attachment).
func NetworkAttachmentRef(namespace, name, statusNAD string) string {
	switch {
	case statusNAD == "":
		return namespace + "/" + name
	case strings.Contains(statusNAD, "/"):
		return statusNAD
	default:
		return namespace + "/" + statusNAD
	}
}

// ServerAddress returns the address a netserver pod serves path on and "" with
// a reason when it has none yet:
//   - PathFastPath: the first IP Multus reported for nad ("<namespace>/<name>")
//     in the pod's k8s.v1.cni.cncf.io/network-status annotation (a JSON list of
//     {name, interface, ips, ...}; name is "<namespace>/<name>", or "<name>" for
//     a NAD in the pod's own namespace);
//   - PathBaseline: status.podIP.
//
// Only a Ready pod counts (its readiness probe connects to netserver).
func ServerAddress(pod *corev1.Pod, path, nad string) (addr, reason string) {
	if !podReady(pod) {
		return "", fmt.Sprintf("pod %s is not Ready (phase %q)", pod.Name, pod.Status.Phase)
	}
	if path != PathFastPath {
		if !isIP(pod.Status.PodIP) {
			return "", fmt.Sprintf("pod %s has no pod IP", pod.Name)
		}
		return pod.Status.PodIP, ""
	}
	raw, ok := pod.Annotations[nadv1.NetworkStatusAnnot]
	if !ok {
		return "", fmt.Sprintf("pod %s has no %s annotation", pod.Name, nadv1.NetworkStatusAnnot)
	}
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(raw), &statuses); err != nil {
		return "", fmt.Sprintf("pod %s has an unreadable %s annotation: %v", pod.Name, nadv1.NetworkStatusAnnot, err)
	}
	short := nad
	if ns, name, ok := strings.Cut(nad, "/"); ok && ns == pod.Namespace {
		short = name
	}
	for _, s := range statuses {
		if !s.Default && (s.Name == nad || s.Name == short) && len(s.IPs) > 0 {
			if !isIP(s.IPs[0]) {
				return "", fmt.Sprintf("pod %s reports %q on network %s in %s, which is not an IP address", pod.Name, s.IPs[0], nad, nadv1.NetworkStatusAnnot)
			}
			return s.IPs[0], ""
		}
	}
	return "", fmt.Sprintf("pod %s has no address on network %s in %s", pod.Name, nad, nadv1.NetworkStatusAnnot)
}

func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// isIP reports whether s is an IPv4 or IPv6 address without a zone, in
// netip's canonical spelling: the one form of an address the runner gets.
func isIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == "" && a.String() == s
}

// MasqueradePodAddress returns the address that reaches vmi over the pod
// network when its interface PodNetworkInterface has KubeVirt's masquerade
// binding: the virt-launcher pod's status.podIP (launcher, nil when not
// known yet; "" then), since masquerade forwards the pod's address to the
// guest. ok is false for any other binding (VMIAddresses' pod address holds).
// The guest itself has an address of KubeVirt's masquerade subnet
// (10.0.2.2 by default), reachable from no other pod; a VMI status that
// reports it (seen once on KubeVirt v1.7.0 with TCG guests, 2026-11-29;
// why KubeVirt reported it then was not established) must not become the
// runner's ssh or netperf target.
func MasqueradePodAddress(vmi *kubevirtv1.VirtualMachineInstance, launcher *corev1.Pod) (addr string, ok bool) {
	for _, i := range vmi.Spec.Domain.Devices.Interfaces {
		if i.Name != PodNetworkInterface {
			continue
		}
		if i.Masquerade == nil {
			return "", false
		}
		if launcher == nil || !isIP(launcher.Status.PodIP) {
			return "", true
		}
		return launcher.Status.PodIP, true
	}
	return "", false
}

// VMIAddresses reads a VM's addresses from its VMI status.interfaces: fast is
// the first address of the interface named network (the attachment's
// "fp-<attachment>"), pod the first address of the interface named
// PodNetworkInterface, or else of the first other interface with an address.
// Either is "" when the VMI does not report it (yet). Only IP addresses
// count: the guest's agent reports them, so a guest could report any string,
// and the runner gets them on its command line (ssh, netperf -H).
func VMIAddresses(vmi *kubevirtv1.VirtualMachineInstance, network string) (fast, pod string) {
	first := func(i kubevirtv1.VirtualMachineInstanceNetworkInterface) string {
		for _, ip := range append([]string{i.IP}, i.IPs...) {
			if isIP(ip) {
				return ip
			}
		}
		return ""
	}
	var other string
	for _, i := range vmi.Status.Interfaces {
		switch {
		case i.Name == network:
			fast = first(i)
		case i.Name == PodNetworkInterface:
			pod = first(i)
		case other == "":
			other = first(i)
		}
	}
	if pod == "" {
		pod = other
	}
	return fast, pod
}

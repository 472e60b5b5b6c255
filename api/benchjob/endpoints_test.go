package benchjob_test

import (
	"testing"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/fastpath-io/fastpath/api/benchjob"
)

// A network-status annotation as Multus writes it: the cluster network first
// (default), then the secondary network named <namespace>/<nad>.
const multusStatus = `[{"name":"kindnet","interface":"eth0","ips":["10.244.0.12"],"mac":"aa:bb:cc:00:00:01","default":true,"dns":{}},
{"name":"apps/db-link","interface":"net1","ips":["10.250.0.3"],"mac":"aa:bb:cc:00:00:02","mtu":9000,"dns":{}}]`

func readyPod(annotations map[string]string, podIP string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "srv", Namespace: "apps", Annotations: annotations},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func TestServerAddress(t *testing.T) {
	notReady := readyPod(map[string]string{"k8s.v1.cni.cncf.io/network-status": multusStatus}, "10.244.0.12")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	pending := readyPod(nil, "")
	pending.Status.Phase = corev1.PodPending
	for _, tc := range []struct {
		name, path, nad string
		pod             *corev1.Pod
		want, reason    string
	}{
		{"fast path from network-status", benchjob.PathFastPath, "apps/db-link", readyPod(map[string]string{"k8s.v1.cni.cncf.io/network-status": multusStatus}, "10.244.0.12"), "10.250.0.3", ""},
		{"short name in the pod's namespace", benchjob.PathFastPath, "apps/db-link",
			readyPod(map[string]string{"k8s.v1.cni.cncf.io/network-status": `[{"name":"db-link","interface":"net1","ips":["fd00::3","10.250.0.9"]}]`}, "10.244.0.12"), "fd00::3", ""},
		{"baseline from status.podIP", benchjob.PathBaseline, "", readyPod(nil, "10.244.0.13"), "10.244.0.13", ""},
		{"not ready", benchjob.PathFastPath, "apps/db-link", notReady, "", "is not Ready"},
		{"pending", benchjob.PathBaseline, "", pending, "", `phase "Pending"`},
		{"no annotation yet", benchjob.PathFastPath, "apps/db-link", readyPod(nil, "10.244.0.12"), "", "has no k8s.v1.cni.cncf.io/network-status annotation"},
		{"unreadable annotation", benchjob.PathFastPath, "apps/db-link", readyPod(map[string]string{"k8s.v1.cni.cncf.io/network-status": "{"}, "10.244.0.12"), "", "unreadable"},
		{"only the default network", benchjob.PathFastPath, "apps/db-link",
			readyPod(map[string]string{"k8s.v1.cni.cncf.io/network-status": `[{"name":"apps/db-link","interface":"eth0","ips":["10.244.0.12"],"default":true}]`}, "10.244.0.12"), "", "no address on network apps/db-link"},
		{"other namespace's NAD of the same name does not count", benchjob.PathFastPath, "other/db-link",
			readyPod(map[string]string{"k8s.v1.cni.cncf.io/network-status": multusStatus}, "10.244.0.12"), "", "no address on network other/db-link"},
		{"baseline without pod IP", benchjob.PathBaseline, "", readyPod(nil, ""), "", "has no pod IP"},
		{"an option in network-status (a tenant may annotate its pods)", benchjob.PathFastPath, "apps/db-link",
			readyPod(map[string]string{"k8s.v1.cni.cncf.io/network-status": `[{"name":"db-link","interface":"net1","ips":["-oProxyCommand=x"]}]`}, "10.244.0.12"), "", `reports "-oProxyCommand=x" on network apps/db-link`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			addr, reason := benchjob.ServerAddress(tc.pod, tc.path, tc.nad)
			g.Expect(addr).To(gomega.Equal(tc.want))
			if tc.reason == "" {
				g.Expect(reason).To(gomega.BeEmpty())
			} else {
				g.Expect(reason).To(gomega.ContainSubstring(tc.reason))
			}
		})
	}
}

func TestVMIAddresses(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ifaces    []kubevirtv1.VirtualMachineInstanceNetworkInterface
		fast, pod string
	}{
		{"default and fast path", []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", IP: "10.244.1.5", IPs: []string{"10.244.1.5"}},
			{Name: "fp-db-link", IP: "10.250.0.3", IPs: []string{"10.250.0.3"}},
		}, "10.250.0.3", "10.244.1.5"},
		{"pod network under another name, IPs only", []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "fp-db-link", IPs: []string{"10.250.0.3"}},
			{Name: "podnet", IPs: []string{"10.244.1.6"}},
		}, "10.250.0.3", "10.244.1.6"},
		{"fast path without an address yet", []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", IP: "10.244.1.5"},
			{Name: "fp-db-link"},
		}, "", "10.244.1.5"},
		{"no interfaces reported", nil, "", ""},
		{"a guest reports options, names and zones", []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", IP: "-oProxyCommand=touch /tmp/pwned", IPs: []string{"-oProxyCommand=touch /tmp/pwned", "guest.example", "10.244.1.5 -v"}},
			{Name: "fp-db-link", IP: "fe80::1%eth0", IPs: []string{"fe80::1%eth0", "--"}},
		}, "", ""},
		{"the first IP after a bogus one", []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{Name: "default", IP: "-x", IPs: []string{"-x", "fd00::5"}},
			{Name: "fp-db-link", IPs: []string{"10.250.0.3"}},
		}, "10.250.0.3", "fd00::5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{Interfaces: tc.ifaces}}
			fast, pod := benchjob.VMIAddresses(vmi, "fp-db-link")
			g.Expect(fast).To(gomega.Equal(tc.fast))
			g.Expect(pod).To(gomega.Equal(tc.pod))
		})
	}
}

func TestMasqueradePodAddress(t *testing.T) {
	iface := func(name string, b kubevirtv1.InterfaceBindingMethod) kubevirtv1.Interface {
		return kubevirtv1.Interface{Name: name, InterfaceBindingMethod: b}
	}
	masq := kubevirtv1.InterfaceBindingMethod{Masquerade: &kubevirtv1.InterfaceMasquerade{}}
	bridge := kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}
	launcher := &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.85.1.9"}}
	for _, tc := range []struct {
		name     string
		ifaces   []kubevirtv1.Interface
		launcher *corev1.Pod
		addr     string
		ok       bool
	}{
		{"masquerade: the launcher's pod IP", []kubevirtv1.Interface{iface("default", masq), iface("fp-db-link", bridge)}, launcher, "10.85.1.9", true},
		{"masquerade, launcher not known yet", []kubevirtv1.Interface{iface("default", masq)}, nil, "", true},
		{"masquerade, launcher without a pod IP", []kubevirtv1.Interface{iface("default", masq)}, &corev1.Pod{}, "", true},
		{"bridge binding: the VMI's own address holds", []kubevirtv1.Interface{iface("default", bridge)}, launcher, "", false},
		{"no pod network interface", []kubevirtv1.Interface{iface("fp-db-link", masq)}, launcher, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			vmi := &kubevirtv1.VirtualMachineInstance{}
			vmi.Spec.Domain.Devices.Interfaces = tc.ifaces
			addr, ok := benchjob.MasqueradePodAddress(vmi, tc.launcher)
			g.Expect(addr).To(gomega.Equal(tc.addr))
			g.Expect(ok).To(gomega.Equal(tc.ok))
		})
	}
}

func TestNetworkAttachmentRef(t *testing.T) {
	for _, tc := range []struct{ status, want string }{
		{"", "apps/db-link"},
		{"apps/fp-db-link", "apps/fp-db-link"},
		{"fp-db-link", "apps/fp-db-link"},
	} {
		gomega.NewWithT(t).Expect(benchjob.NetworkAttachmentRef("apps", "db-link", tc.status)).To(gomega.Equal(tc.want))
	}
}

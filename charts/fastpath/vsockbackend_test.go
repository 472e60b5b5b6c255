package fastpath_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/internal/vsock/backend"
)

// daemonSets renders the chart with set and decodes its DaemonSets by name.
func daemonSets(t *testing.T, set ...string) map[string]appsv1.DaemonSet {
	t.Helper()
	args := []string{"template", "fp", ".", "--namespace", "fastpath-system"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out := map[string]appsv1.DaemonSet{}
	for _, doc := range strings.Split(helm(t, args...), "\n---") {
		if !strings.Contains(doc, "kind: DaemonSet") {
			continue
		}
		var ds appsv1.DaemonSet
		NewWithT(t).Expect(yaml.UnmarshalStrict([]byte(doc), &ds)).To(Succeed(), doc)
		out[ds.Name] = ds
	}
	return out
}

// TestChartVsockBackend: with agent.sibling.enabled (here with the relay in
// the agent, to see Sibling alone) the chart runs
// vhost-device-vsock in a DaemonSet of its own that helm upgrade never
// restarts (OnDelete), as a non-root user with no capability, no host
// namespace and only its socket directory, and with no init container:
// nothing of the pod runs as root. The agent makes that directory for it
// (--sibling-backend-gid: root's, in the backend's group), so the pod's
// hostPath must exist rather than be made by kubelet as root's 0755. The
// agent drives it through its socket, with the backend's group and
// CAP_FOWNER (the hard link of a socket it does not own) and nothing else
// added. Without Sibling and with the relay in the agent
// (agent.relay.backend.enabled=false) neither appears.
func TestChartVsockBackend(t *testing.T) {
	g := NewWithT(t)
	off := daemonSets(t, "agent.relay.backend.enabled=false")
	g.Expect(off).NotTo(HaveKey("fastpath-vsock-backend"))
	g.Expect(off["fastpath-agent"].Spec.Template.Spec.SecurityContext).To(BeNil())

	dss := daemonSets(t, "agent.sibling.enabled=true", "agent.relay.backend.enabled=false", "image.tag=v9")
	g.Expect(dss).To(HaveKey("fastpath-vsock-backend"))
	ds := dss["fastpath-vsock-backend"]
	g.Expect(ds.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteDaemonSetStrategyType), "helm upgrade must not restart it")
	ps := ds.Spec.Template.Spec
	g.Expect(ps.HostNetwork).To(BeFalse())
	g.Expect(ps.HostPID).To(BeFalse())
	g.Expect(ps.HostIPC).To(BeFalse())
	g.Expect(ps.AutomountServiceAccountToken).To(Equal(ptr.To(false)), "no Kubernetes client")
	g.Expect(ps.ServiceAccountName).To(Equal("fastpath-vsock-backend"))
	g.Expect(ps.SecurityContext).To(Equal(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}))
	// The agent's nodes.
	g.Expect(ps.NodeSelector).To(Equal(dss["fastpath-agent"].Spec.Template.Spec.NodeSelector))
	g.Expect(ps.Volumes).To(Equal([]corev1.Volume{{Name: "sockets", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: "/var/run/fastpath/vsock/backend", Type: ptr.To(corev1.HostPathDirectory)}}}}), "only its socket directory, which the agent makes")

	g.Expect(ps.Containers).To(HaveLen(1))
	c := ps.Containers[0]
	g.Expect(c.Image).To(Equal("ghcr.io/fastpath-io/fastpath-vsock-backend:v9"))
	g.Expect(c.Args).To(Equal([]string{"--socket-dir=/var/run/fastpath/vsock/backend", "--vhost-device-vsock=/usr/local/bin/vhost-device-vsock"}))
	g.Expect(strings.Join(c.Args, " ")).NotTo(ContainSubstring("forward"))
	g.Expect(c.SecurityContext).To(Equal(&corev1.SecurityContext{Privileged: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}))
	g.Expect(c.VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: "sockets", MountPath: "/var/run/fastpath/vsock/backend"}}))
	g.Expect(c.LivenessProbe).To(BeNil(), "a restart would drop every guest's connections")
	g.Expect(c.ReadinessProbe.Exec.Command).To(ContainElement("--probe"))
	g.Expect(c.Resources.Limits).NotTo(HaveKey(corev1.ResourceMemory), "an OOM kill would drop every guest's connections")

	g.Expect(ps.InitContainers).To(BeEmpty(), "nothing of the pod runs as root")
	// Room to SIGTERM the vhost-device-vsock processes, which reset their
	// guests' connections, before kubelet SIGKILLs the pod.
	g.Expect(time.Duration(*ps.TerminationGracePeriodSeconds) * time.Second).To(BeNumerically(">=", 2*backend.StopTimeout))

	agent := dss["fastpath-agent"].Spec.Template.Spec
	g.Expect(agent.SecurityContext).To(Equal(&corev1.PodSecurityContext{SupplementalGroups: []int64{65532}}))
	g.Expect(agent.Containers[0].Args).To(ContainElements("--sibling-backend-socket=/var/run/fastpath/vsock/backend/control.sock", "--sibling-backend-gid=65532"))
	g.Expect(agent.Containers[0].SecurityContext.Capabilities.Add).To(Equal([]corev1.Capability{"NET_ADMIN", "NET_RAW", "FOWNER"}))
	// The agent mounts the parent: the hard link from backend/ into alloc/
	// stays in one mount.
	g.Expect(agent.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "sibling-sockets", MountPath: "/var/run/fastpath/vsock"}))

	// Another user and group, and never root.
	dss = daemonSets(t, "agent.sibling.enabled=true", "agent.relay.backend.enabled=false", "agent.sibling.backend.uid=4000", "agent.sibling.backend.gid=4001")
	g.Expect(*dss["fastpath-vsock-backend"].Spec.Template.Spec.SecurityContext.RunAsUser).To(Equal(int64(4000)))
	g.Expect(dss["fastpath-agent"].Spec.Template.Spec.SecurityContext.SupplementalGroups).To(Equal([]int64{4001}))
	g.Expect(dss["fastpath-agent"].Spec.Template.Spec.Containers[0].Args).To(ContainElement("--sibling-backend-gid=4001"))
	b, err := exec.Command("../../bin/helm", "template", "fp", ".", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
		"--set", "agent.sibling.enabled=true", "--set", "agent.sibling.backend.uid=0").CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("agent.sibling.backend.uid and .gid must be above 0"))
}

// TestChartVsockBackendRelay: with agent.relay.backend.enabled the backend
// DaemonSet runs the relay (--relay on AF_VSOCK), with or without Sibling,
// still OnDelete, non-root, with no capability and no host network (AF_VSOCK
// needs neither for the relay's ports, >= 1024), its limits from its own
// memory limit when one is set; the agent gets --relay-backend-socket, the
// backend's group and its socket directory, and no capability for it. Off,
// the relay stays in the agent.
func TestChartVsockBackendRelay(t *testing.T) {
	g := NewWithT(t)
	off := daemonSets(t, "agent.relay.backend.enabled=false", "agent.relay.maxConnsPerNamespace=50")
	g.Expect(off).NotTo(HaveKey("fastpath-vsock-backend"))
	offArgs := off["fastpath-agent"].Spec.Template.Spec.Containers[0].Args
	g.Expect(strings.Join(offArgs, " ")).NotTo(ContainSubstring("--relay-backend-socket"))
	g.Expect(offArgs).To(ContainElement("--relay-max-conns-per-namespace=50"), "the relay in the agent takes the cap")

	dss := daemonSets(t, "agent.relay.backend.enabled=true", "agent.relay.maxConnsPerNamespace=50")
	g.Expect(dss).To(HaveKey("fastpath-vsock-backend"))
	ds := dss["fastpath-vsock-backend"]
	g.Expect(ds.Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteDaemonSetStrategyType), "an agent rollout and helm upgrade must not restart it")
	ps := ds.Spec.Template.Spec
	g.Expect(ps.HostNetwork).To(BeFalse())
	g.Expect(*ps.SecurityContext.RunAsUser).To(Equal(int64(65532)))
	c := ps.Containers[0]
	g.Expect(c.Args).To(Equal([]string{"--socket-dir=/var/run/fastpath/vsock/backend", "--vhost-device-vsock=", "--relay", "--vsock-transport=vsock",
		"--relay-max-conns-per-namespace=50", "--memory-limit=134217728"}), "relay only: no vhost-device-vsock; caps from the 128 MiB budget, as in the agent")
	g.Expect(c.SecurityContext.Capabilities).To(Equal(&corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}))
	g.Expect(c.Env).To(BeEmpty(), "no memory limit: the budget's flag instead")
	g.Expect(c.LivenessProbe).To(BeNil(), "a restart would reset every relayed connection")

	agent := dss["fastpath-agent"].Spec.Template.Spec
	args := agent.Containers[0].Args
	g.Expect(args).To(ContainElement("--relay-backend-socket=/var/run/fastpath/vsock/backend/control.sock"))
	g.Expect(args).To(ContainElement("--relay-backend-gid=65532"), "the agent makes the backend's directory for its group")
	g.Expect(ps.Volumes).To(ContainElement(HaveField("VolumeSource.HostPath.Type", HaveValue(Equal(corev1.HostPathDirectory)))),
		"the backend waits for the directory the agent makes")
	g.Expect(args).To(ContainElement("--vsock-transport=vsock"), "the agent's status describes the backend's transport")
	g.Expect(strings.Join(args, " ")).NotTo(ContainSubstring("--relay-max-conns-per-namespace"), "the backend's flag now")
	g.Expect(agent.SecurityContext).To(Equal(&corev1.PodSecurityContext{SupplementalGroups: []int64{65532}}))
	g.Expect(agent.Containers[0].SecurityContext.Capabilities.Add).To(Equal([]corev1.Capability{"NET_ADMIN", "NET_RAW"}), "no FOWNER without Sibling")
	g.Expect(agent.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "vsock-backend", MountPath: "/var/run/fastpath/vsock/backend"}))
	g.Expect(agent.Volumes).To(ContainElement(corev1.Volume{Name: "vsock-backend", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: "/var/run/fastpath/vsock/backend", Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}}))

	// With Sibling: one backend runs both; with a memory limit the relay's
	// caps follow from it.
	dss = daemonSets(t, "agent.relay.backend.enabled=true", "agent.sibling.enabled=true", "agent.sibling.backend.resources.limits.memory=256Mi")
	c = dss["fastpath-vsock-backend"].Spec.Template.Spec.Containers[0]
	g.Expect(c.Args).To(Equal([]string{"--socket-dir=/var/run/fastpath/vsock/backend", "--vhost-device-vsock=/usr/local/bin/vhost-device-vsock", "--relay", "--vsock-transport=vsock"}))
	g.Expect(c.Env).To(Equal([]corev1.EnvVar{{Name: "FASTPATH_MEMORY_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}}))
	agent = dss["fastpath-agent"].Spec.Template.Spec
	g.Expect(agent.Containers[0].Args).To(ContainElements("--relay-backend-socket=/var/run/fastpath/vsock/backend/control.sock",
		"--sibling-backend-socket=/var/run/fastpath/vsock/backend/control.sock"))

	// Relay ports below 1024 would need CAP_NET_BIND_SERVICE, which the backend lacks.
	b, err := exec.Command("../../bin/helm", "template", "fp", ".", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
		"--set", "agent.relay.backend.enabled=true", "--set", "operator.relayPortRange=1000-1999").CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring(`operator.relayPortRange "1000-1999" starts below 1024`))
	g.Expect(daemonSets(t, "agent.relay.backend.enabled=true", "operator.relayPortRange=1024-1999")).To(HaveKey("fastpath-vsock-backend"))
}

// TestChartVsockBackendRelayIsTheDefault: the default render runs vsock mode
// Relay's relay in fastpath-vsock-backend (--relay), which an agent rollout
// does not restart, and the agent programs it (--relay-backend-socket), even
// without Sibling; agent.relay.backend.enabled=false gives the old shape, the
// relay in the agent and no backend DaemonSet.
func TestChartVsockBackendRelayIsTheDefault(t *testing.T) {
	g := NewWithT(t)
	dss := daemonSets(t)
	g.Expect(dss).To(HaveKey("fastpath-vsock-backend"))
	g.Expect(dss["fastpath-vsock-backend"].Spec.UpdateStrategy.Type).To(Equal(appsv1.OnDeleteDaemonSetStrategyType))
	g.Expect(dss["fastpath-vsock-backend"].Spec.Template.Spec.Containers[0].Args).To(Equal([]string{
		"--socket-dir=/var/run/fastpath/vsock/backend", "--vhost-device-vsock=", "--relay", "--vsock-transport=vsock", "--memory-limit=134217728"}))
	agent := dss["fastpath-agent"].Spec.Template.Spec
	g.Expect(agent.Containers[0].Args).To(ContainElement("--relay-backend-socket=/var/run/fastpath/vsock/backend/control.sock"))
	g.Expect(strings.Join(agent.Containers[0].Args, " ")).NotTo(ContainSubstring("--sibling-backend-socket"), "Sibling stays off by default")
	g.Expect(agent.SecurityContext).To(Equal(&corev1.PodSecurityContext{SupplementalGroups: []int64{65532}}))

	old := daemonSets(t, "agent.relay.backend.enabled=false")
	g.Expect(old).To(HaveLen(1))
	g.Expect(old).To(HaveKey("fastpath-agent"))
	agent = old["fastpath-agent"].Spec.Template.Spec
	g.Expect(strings.Join(agent.Containers[0].Args, " ")).NotTo(ContainSubstring("backend"))
	g.Expect(agent.SecurityContext).To(BeNil())
	g.Expect(agent.Volumes).NotTo(ContainElement(HaveField("Name", "vsock-backend")))
}

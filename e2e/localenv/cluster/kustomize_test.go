package cluster

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/internal/testing/testenv"
)

// TestKustomizeOverlayRunsEveryImageLocally: the overlay Install applies
// with --kustomize, built by bin/kubectl (no cluster), runs every workload of
// config/default from the images make images imported (pull policy Never),
// including fastpath-vsock-backend, which runs the relay by default
// (agent.relay.backend.enabled): no KubeVirt node selector on it either,
// and its socket directory, which the agent mounts for --relay-backend-socket,
// under the cluster's run directory rather than the host's /var/run.
func TestKustomizeOverlayRunsEveryImageLocally(t *testing.T) {
	g := NewWithT(t)
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	o := Options{Dir: t.TempDir(), PodCIDR: DefaultPodCIDR}
	dir, err := o.writeKustomizeOverlay(root)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(root, "bin", "kubectl"), "kustomize", dir).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "kubectl kustomize (run make setup if bin/kubectl is missing): %s", out)

	dss := map[string]appsv1.DaemonSet{}
	images := map[string]bool{}
	for _, doc := range strings.Split(string(out), "\n---") {
		var head struct {
			Kind string `json:"kind"`
		}
		g.Expect(yaml.Unmarshal([]byte(doc), &head)).To(Succeed())
		var spec corev1.PodSpec
		switch head.Kind {
		case "DaemonSet":
			var ds appsv1.DaemonSet
			g.Expect(yaml.Unmarshal([]byte(doc), &ds)).To(Succeed())
			dss[ds.Name], spec = ds, ds.Spec.Template.Spec
		case "Deployment":
			var dep appsv1.Deployment
			g.Expect(yaml.Unmarshal([]byte(doc), &dep)).To(Succeed())
			spec = dep.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			images[c.Image] = true
			g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullNever), c.Name)
		}
	}
	g.Expect(images).To(Equal(map[string]bool{"localhost/fastpath-operator:local": true, "localhost/fastpath-agent:local": true,
		"localhost/fastpath-vsock-backend:local": true}))

	backendDir := filepath.Join(o.layout().run, "sibling", "backend")
	hostPath := func(ps corev1.PodSpec, name string) string {
		for _, v := range ps.Volumes {
			if v.Name == name && v.HostPath != nil {
				return v.HostPath.Path
			}
		}
		return ""
	}
	g.Expect(dss).To(HaveKey("fastpath-vsock-backend"))
	backend := dss["fastpath-vsock-backend"].Spec.Template.Spec
	g.Expect(backend.NodeSelector).To(BeEmpty())
	g.Expect(backend.Containers[0].Args).To(ContainElement("--relay"))
	g.Expect(hostPath(backend, "sockets")).To(Equal(backendDir))
	agent := dss["fastpath-agent"].Spec.Template.Spec
	g.Expect(agent.NodeSelector).To(BeEmpty())
	g.Expect(agent.Containers[0].Args).To(ContainElement("--relay-backend-socket=/var/run/fastpath/vsock/backend/control.sock"))
	g.Expect(agent.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "vsock-backend", MountPath: "/var/run/fastpath/vsock/backend"}),
		"the same directory inside both pods")
	g.Expect(backend.Containers[0].VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "sockets", MountPath: "/var/run/fastpath/vsock/backend"}))
	g.Expect(hostPath(agent, "vsock-backend")).To(Equal(backendDir))
}

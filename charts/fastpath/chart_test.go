// The tests in package fastpath_test check the Helm chart with the real helm binary built into
// bin/ by hack/setup.sh: it lints, it renders the kinds a cluster admin expects,
// and its CRDs are exactly config/crd/bases (one source of truth, copied by
// `make manifests`).
package fastpath_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/fastpath-io/fastpath/config/crd"
)

// vapAPI is the capability the chart requires unless admissionPolicies.enabled
// is false. helm install finds it in the cluster's discovery; helm template
// knows only group versions, not kinds, unless given --api-versions.
const vapAPI = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"

// helm runs bin/helm and returns its stdout, failing the test on an error.
// A `helm template` renders as for a cluster that serves vapAPI (as make
// manifests does); helmRun renders without it.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	if len(args) > 0 && args[0] == "template" {
		args = append(args, "--api-versions", vapAPI)
	}
	out, err := helmRun(t, args...)
	NewWithT(t).Expect(err).NotTo(HaveOccurred(), "helm %s: %s (run `make setup` if bin/helm is missing)", strings.Join(args, " "), out)
	return out
}

// helmRun runs bin/helm with exactly args; on an error it returns stdout and
// stderr together.
func helmRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := filepath.Abs("../../bin/helm")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// helm lint has no --api-versions, so it lints the chart without its admission
// policies; templates/admission.yaml is rendered by the tests below and
// enforced by a real kube-apiserver in admission_test.go.
func TestChartLints(t *testing.T) {
	out := helm(t, "lint", "--strict", ".", "--set", "admissionPolicies.enabled=false")
	NewWithT(t).Expect(out).To(ContainSubstring("0 chart(s) failed"))
}

// Where the API server does not serve ValidatingAdmissionPolicy v1 the chart
// installs nothing, rather than a Fastpath whose NADs nothing checks;
// admissionPolicies.enabled=false is the explicit way past it (templates/NOTES.txt,
// which helm install prints and keeps with the release, then says what is lost).
func TestChartRefusesAClusterWithoutAdmissionPolicies(t *testing.T) {
	g := NewWithT(t)
	out, err := helmRun(t, "template", "fp", ".", "--namespace", "fastpath-system")
	g.Expect(err).To(HaveOccurred(), "rendered without the ValidatingAdmissionPolicy API:\n%s", out)
	g.Expect(out).To(ContainSubstring("this cluster does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy"))
	g.Expect(out).To(ContainSubstring("admissionPolicies.enabled=false"), "the message names the opt-out")

	out, err = helmRun(t, "template", "fp", ".", "--namespace", "fastpath-system", "--set", "admissionPolicies.enabled=false")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).NotTo(ContainSubstring("kind: ValidatingAdmissionPolicy"))
	g.Expect(out).To(ContainSubstring("kind: DaemonSet"))
}

func TestChartRendersOperatorAgentAndRBAC(t *testing.T) {
	g := NewWithT(t)
	out := helm(t, "template", "fp", ".", "--namespace", "fastpath-system",
		"--set", "operator.podNetworkCIDRs=10.244.0.0/16", "--set", "metrics.serviceMonitor=true")
	kinds := map[string][]string{}
	for _, doc := range strings.Split(out, "\n---") {
		obj := map[string]any{}
		g.Expect(yaml.Unmarshal([]byte(doc), &obj)).To(Succeed(), doc)
		if len(obj) == 0 {
			continue
		}
		md, _ := obj["metadata"].(map[string]any)
		kinds[obj["kind"].(string)] = append(kinds[obj["kind"].(string)], md["name"].(string))
	}
	g.Expect(kinds["Deployment"]).To(ConsistOf("fastpath-operator"))
	// The relay in the vsock backend (agent.relay.backend.enabled, the default).
	g.Expect(kinds["DaemonSet"]).To(ConsistOf("fastpath-agent", "fastpath-vsock-backend"))
	g.Expect(kinds["ClusterRole"]).To(ConsistOf("fastpath-operator", "fastpath-operator-binding-plugin", "fastpath-agent", "fastpath-metrics-reader", "fastpath-tenant-edit", "fastpath-tenant-view"))
	g.Expect(kinds["ValidatingAdmissionPolicy"]).To(ConsistOf("fastpath-agent-own-node", "fastpath-agent-node-label", "fastpath-device-requests", "fastpath-vm-device-requests", "fastpath-vmi-device-requests", "fastpath-operator-own-objects", "fastpath-operator-runner-pods", "fastpath-operator-kubevirt-binding", "fastpath-nad-owner", "fastpath-nad-devices", "fastpath-nad-derived-devices"))
	g.Expect(kinds["ValidatingAdmissionPolicyBinding"]).To(ConsistOf("fastpath-agent-own-node", "fastpath-agent-node-label", "fastpath-device-requests", "fastpath-vm-device-requests", "fastpath-vmi-device-requests", "fastpath-operator-own-objects", "fastpath-operator-runner-pods", "fastpath-operator-kubevirt-binding", "fastpath-nad-owner", "fastpath-nad-devices", "fastpath-nad-derived-devices"))
	g.Expect(kinds["ServiceMonitor"]).To(HaveLen(1))
	g.Expect(out).To(ContainSubstring("--pod-network-cidr=10.244.0.0/16"))
	g.Expect(out).To(ContainSubstring("fastpathattachments"), "the operator ClusterRole carries the generated rules")
	g.Expect(out).To(ContainSubstring("tokenreviews"), "the metrics endpoints can review tokens")
	g.Expect(out).To(ContainSubstring("subjectaccessreviews"), "and ask whether the caller may GET /metrics")
	for _, s := range []string{"--metrics-bind-address=:8443", "--metrics-bind-address=:9443", "--metrics-secure=true", "scheme: https"} {
		g.Expect(out).To(ContainSubstring(s))
	}
}

// metrics.secure=false serves plain HTTP on the old ports, without the reader role.
func TestChartPlainMetrics(t *testing.T) {
	g := NewWithT(t)
	out := helm(t, "template", "fp", ".", "--namespace", "fastpath-system", "--set", "metrics.secure=false", "--set", "metrics.serviceMonitor=true")
	for _, s := range []string{"--metrics-bind-address=:8080", "--metrics-bind-address=:9090", "--metrics-secure=false", "containerPort: 8080", "containerPort: 9090"} {
		g.Expect(out).To(ContainSubstring(s))
	}
	g.Expect(out).NotTo(ContainSubstring("fastpath-metrics-reader"))
	g.Expect(out).NotTo(ContainSubstring("scheme: https"))
}

func TestChartCRDsMatchGeneratedCRDs(t *testing.T) {
	g := NewWithT(t)
	want, err := filepath.Glob("../../config/crd/bases/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(want).NotTo(BeEmpty())
	got, err := filepath.Glob("files/crds/*.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(got)).To(Equal(len(want)))
	for _, w := range want {
		a, err := os.ReadFile(w)
		g.Expect(err).NotTo(HaveOccurred())
		b, err := os.ReadFile(filepath.Join("files", "crds", filepath.Base(w)))
		g.Expect(err).NotTo(HaveOccurred(), "run make manifests")
		g.Expect(string(b)).To(Equal(string(a)), "%s differs from config/crd/bases: run make manifests", w)
	}
	// Helm installs a chart's crds/ once and never upgrades it (Helm's
	// "Custom Resource Definitions" best practice): a helm upgrade that brings
	// a new field would keep serving the old schema.
	_, err = os.Stat("crds")
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "charts/fastpath/crds is back: Helm never upgrades it; the CRDs are templates (templates/crds.yaml)")
}

// TestChartRendersTheCRDs: the CRDs are templates, so helm install and
// helm upgrade apply them; each is config/crd/bases with the release's labels
// and helm.sh/resource-policy keep, so helm uninstall leaves them and the
// users' objects. crds.keep=false drops the annotation, crds.enabled=false
// renders none (the admin applies config/crd).
func TestChartRendersTheCRDs(t *testing.T) {
	g := NewWithT(t)
	crds := func(set ...string) map[string]*apiextensionsv1.CustomResourceDefinition {
		args := []string{"template", "fp", ".", "--namespace", "fastpath-system"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out := map[string]*apiextensionsv1.CustomResourceDefinition{}
		for _, doc := range strings.Split(helm(t, args...), "\n---") {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(yaml.Unmarshal([]byte(doc), crd)).To(Succeed(), doc)
			if crd.Kind == "CustomResourceDefinition" {
				out[crd.Name] = crd
			}
		}
		return out
	}
	want, err := crd.Bases()
	g.Expect(err).NotTo(HaveOccurred())
	got := crds()
	g.Expect(got).To(HaveLen(len(want)))
	for _, w := range want {
		c, ok := got[w.Name]
		g.Expect(ok).To(BeTrue(), "CRD %s not rendered", w.Name)
		g.Expect(c.Spec).To(Equal(w.Spec), "CRD %s: the rendered schema is not config/crd/bases", w.Name)
		g.Expect(c.Annotations).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
		for k, v := range w.Annotations {
			g.Expect(c.Annotations).To(HaveKeyWithValue(k, v))
		}
		g.Expect(c.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", "fp"))
	}
	for _, c := range crds("crds.keep=false") {
		g.Expect(c.Annotations).NotTo(HaveKey("helm.sh/resource-policy"))
	}
	g.Expect(crds("crds.enabled=false")).To(BeEmpty())
}

// operatorArgs returns the args of the operator container rendered with the
// given --set values.
func operatorArgs(t *testing.T, set ...string) []string {
	t.Helper()
	g := NewWithT(t)
	args := []string{"template", "fp", ".", "--namespace", "fastpath-system", "--show-only", "templates/operator.yaml"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	for _, doc := range strings.Split(helm(t, args...), "\n---") {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Name string   `json:"name"`
							Args []string `json:"args"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		g.Expect(yaml.Unmarshal([]byte(doc), &obj)).To(Succeed(), doc)
		if obj.Kind == "Deployment" {
			g.Expect(obj.Spec.Template.Spec.Containers).To(HaveLen(1))
			return obj.Spec.Template.Spec.Containers[0].Args
		}
	}
	t.Fatal("no Deployment in templates/operator.yaml")
	return nil
}

func TestChartPassesTheDomainHookImage(t *testing.T) {
	g := NewWithT(t)
	chart := map[string]any{}
	data, err := os.ReadFile("Chart.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(yaml.Unmarshal(data, &chart)).To(Succeed())

	g.Expect(operatorArgs(t)).To(ContainElement(
		"--domain-hook-image=ghcr.io/fastpath-io/fastpath-domain-hook:"+chart["appVersion"].(string)),
		"by default the registry's image at the chart's appVersion, like the other images")
	g.Expect(operatorArgs(t, "image.registry=registry.example.com/fp", "image.tag=v9")).To(ContainElement(
		"--domain-hook-image=registry.example.com/fp/fastpath-domain-hook:v9"))
	g.Expect(operatorArgs(t, "operator.domainHookImage=registry.example.com/own/hook:1")).To(ContainElement(
		"--domain-hook-image=registry.example.com/own/hook:1"))
}

// TestChartRegistersTheBindingPlugins: by default the operator registers
// both binding plugins in kubevirt/kubevirt with patch on that one object
// only, and a pre-delete hook Job removes them; registerBindingPlugins=false
// renders neither and tells the operator so.
func TestChartRegistersTheBindingPlugins(t *testing.T) {
	g := NewWithT(t)
	objects := func(set ...string) map[string]renderedObject {
		out := map[string]renderedObject{}
		for _, o := range render(t, set...) {
			out[o.Kind+"/"+o.Metadata.Name] = o
		}
		return out
	}
	args := operatorArgs(t)
	g.Expect(args).To(ContainElements("--register-binding-plugins=true", "--kubevirt=kubevirt/kubevirt",
		"--binding=fastpath", "--macvtap-binding=fastpath-macvtap"))
	objs := objects()
	role := objs["ClusterRole/fastpath-operator-binding-plugin"]
	g.Expect(role.Rules).To(HaveLen(1))
	g.Expect(role.Rules[0].Resources).To(Equal([]string{"kubevirts"}))
	g.Expect(role.Rules[0].ResourceNames).To(Equal([]string{"kubevirt"}), "patch on the one KubeVirt CR, by name")
	g.Expect(role.Rules[0].Verbs).To(ConsistOf("get", "patch"))
	g.Expect(objs).To(HaveKey("ClusterRoleBinding/fastpath-operator-binding-plugin"))
	job := objs["Job/fastpath-unregister-binding-plugins"]
	g.Expect(job.Metadata.Annotations).To(HaveKeyWithValue("helm.sh/hook", "pre-delete"))
	g.Expect(job.Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--unregister-binding-plugins", "--kubevirt=kubevirt/kubevirt"))

	g.Expect(operatorArgs(t, "kubevirt.namespace=kubevirt-hyperconverged", "kubevirt.name=kv", "operator.macvtapBinding=fp-macvtap")).To(
		ContainElements("--kubevirt=kubevirt-hyperconverged/kv", "--macvtap-binding=fp-macvtap"))
	off := objects("kubevirt.registerBindingPlugins=false")
	g.Expect(off).NotTo(HaveKey("ClusterRole/fastpath-operator-binding-plugin"))
	g.Expect(off).NotTo(HaveKey("Job/fastpath-unregister-binding-plugins"))
	g.Expect(operatorArgs(t, "kubevirt.registerBindingPlugins=false")).To(ContainElement("--register-binding-plugins=false"))
}

// renderedObject is the part of a rendered object the least-privilege and
// binding plugin checks read.
type renderedObject struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Rules []struct {
		APIGroups       []string `json:"apiGroups"`
		Resources       []string `json:"resources"`
		ResourceNames   []string `json:"resourceNames"`
		Verbs           []string `json:"verbs"`
		NonResourceURLs []string `json:"nonResourceURLs"`
	} `json:"rules"`
	Spec struct {
		Template struct {
			Spec struct {
				HostNetwork    bool                `json:"hostNetwork"`
				NodeSelector   map[string]string   `json:"nodeSelector"`
				Tolerations    []map[string]any    `json:"tolerations"`
				Containers     []renderedContainer `json:"containers"`
				InitContainers []renderedContainer `json:"initContainers"`
				Volumes        []struct {
					Name     string `json:"name"`
					HostPath *struct {
						Path string `json:"path"`
					} `json:"hostPath"`
				} `json:"volumes"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

type renderedContainer struct {
	Name            string         `json:"name"`
	Image           string         `json:"image"`
	Args            []string       `json:"args"`
	SecurityContext map[string]any `json:"securityContext"`
	VolumeMounts    []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
		ReadOnly  bool   `json:"readOnly"`
	} `json:"volumeMounts"`
}

func render(t *testing.T, set ...string) []renderedObject {
	t.Helper()
	args := []string{"template", "fp", ".", "--namespace", "fastpath-system"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var out []renderedObject
	for _, doc := range strings.Split(helm(t, args...), "\n---") {
		var o renderedObject
		NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &o)).To(Succeed(), doc)
		if o.Kind != "" {
			out = append(out, o)
		}
	}
	return out
}

// The default install grants least privilege (issue 17): no privileged
// container, no wildcard and no Secret read in any ClusterRole, tenant rights
// only on the namespaced tenant kinds, an agent with NET_ADMIN and NET_RAW
// only, no writable /dev, on KubeVirt nodes only; the vsock backend that runs
// the relay with no capability, no host network, not as root.
func TestChartGrantsLeastPrivilege(t *testing.T) {
	g := NewWithT(t)
	out := helm(t, "template", "fp", ".", "--namespace", "fastpath-system")
	g.Expect(out).NotTo(MatchRegexp(`privileged:\s*true`))
	objs := render(t)
	var agent, backend *renderedObject
	for i, o := range objs {
		switch o.Kind {
		case "ClusterRole", "Role":
			for _, r := range o.Rules {
				for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.NonResourceURLs} {
					g.Expect(list).NotTo(ContainElement(ContainSubstring("*")), "%s %s: %+v", o.Kind, o.Metadata.Name, r)
				}
				if o.Kind == "ClusterRole" {
					g.Expect(r.Resources).NotTo(ContainElement("secrets"), "ClusterRole %s reads Secrets cluster-wide", o.Metadata.Name)
				}
				if strings.HasPrefix(o.Metadata.Name, "fastpath-tenant-") {
					g.Expect(r.Resources).To(ConsistOf("fastpathattachments", "fastpathbenchmarks"), "tenant roles cover the namespaced tenant kinds only")
				}
			}
		case "DaemonSet":
			switch o.Metadata.Name {
			case "fastpath-agent":
				agent = &objs[i]
			case "fastpath-vsock-backend":
				backend = &objs[i]
			}
		}
	}
	g.Expect(agent).NotTo(BeNil())
	g.Expect(backend).NotTo(BeNil(), "the relay's DaemonSet (agent.relay.backend.enabled)")
	g.Expect(backend.Spec.Template.Spec.HostNetwork).To(BeFalse())
	g.Expect(backend.Spec.Template.Spec.NodeSelector).To(Equal(agent.Spec.Template.Spec.NodeSelector))
	g.Expect(backend.Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(backend.Spec.Template.Spec.Containers[0].SecurityContext).To(And(HaveKeyWithValue("privileged", false),
		HaveKeyWithValue("allowPrivilegeEscalation", false), HaveKeyWithValue("capabilities", Equal(map[string]any{"drop": []any{"ALL"}}))))
	ps := agent.Spec.Template.Spec
	g.Expect(ps.NodeSelector).To(HaveKeyWithValue("kubevirt.io/schedulable", "true"))
	g.Expect(ps.Tolerations).To(BeEmpty(), "no toleration of every taint")
	g.Expect(ps.Containers).To(HaveLen(1))
	sc := ps.Containers[0].SecurityContext
	g.Expect(sc).To(HaveKeyWithValue("privileged", false))
	g.Expect(sc).To(HaveKeyWithValue("allowPrivilegeEscalation", false))
	// NET_ADMIN: bridges through netlink, the relay's AF_VSOCK sockets.
	// NET_RAW: the DHCP responder's AF_PACKET socket on each Linux bridge
	// (agent.dhcp, on by default; internal/node/dhcp): the bridges have no
	// IPv4 address, and the socket binds no UDP port, so no NET_BIND_SERVICE.
	g.Expect(sc).To(HaveKeyWithValue("capabilities", Equal(map[string]any{"drop": []any{"ALL"}, "add": []any{"NET_ADMIN", "NET_RAW"}})))
	g.Expect(ps.Containers[0].VolumeMounts).To(ContainElements(HaveField("Name", "cni-leases"), HaveField("Name", "cni-ipam")))
	for _, m := range ps.Containers[0].VolumeMounts {
		g.Expect(m.MountPath).NotTo(Equal("/dev"))
		if m.Name == "cni-leases" || m.Name == "cni-ipam" {
			// The DHCP responder reads the plugin's leases and host-local's
			// allocations, and nothing else of its state.
			g.Expect(m.MountPath).To(Equal(map[string]string{"cni-leases": "/var/lib/cni/fastpath/leases", "cni-ipam": "/var/lib/cni/fastpath/ipam"}[m.Name]))
			g.Expect(m.ReadOnly).To(BeTrue())
			continue
		}
		g.Expect(m.MountPath).NotTo(HavePrefix("/var/lib/cni"), "unused mount")
		if m.Name == "dev" || m.Name == "cni-bin" || m.Name == "cni-node-config" {
			g.Expect(m.ReadOnly).To(BeTrue(), "the long-running agent writes no host path of %s", m.Name)
		}
	}
	g.Expect(ps.Containers[0].Args).To(ContainElement("--cni-verify-only"))
	// Only the init container writes the CNI directories, with no capability.
	g.Expect(ps.InitContainers).To(ConsistOf(And(HaveField("Name", "install-cni"), HaveField("Args", ContainElement("--install-cni")))))
	g.Expect(ps.InitContainers[0].SecurityContext).To(And(HaveKeyWithValue("privileged", false), HaveKeyWithValue("allowPrivilegeEscalation", false),
		HaveKeyWithValue("capabilities", Equal(map[string]any{"drop": []any{"ALL"}}))))
	var initMounts []string
	for _, m := range ps.InitContainers[0].VolumeMounts {
		initMounts = append(initMounts, m.Name)
	}
	g.Expect(initMounts).To(ConsistOf("cni-bin", "cni-node-config"))

	// Opt-ins are explicit and named.
	objs = render(t, "agent.extraCapabilities={SYS_ADMIN}")
	for _, o := range objs {
		if o.Kind == "DaemonSet" && o.Metadata.Name == "fastpath-agent" {
			g.Expect(o.Spec.Template.Spec.Containers[0].SecurityContext).To(HaveKeyWithValue("capabilities", HaveKeyWithValue("add", []any{"NET_ADMIN", "NET_RAW", "SYS_ADMIN"})))
		}
	}
	// Without the DHCP responder, no NET_RAW and no lease mount.
	for _, o := range render(t, "agent.dhcp.enabled=false") {
		if o.Kind == "DaemonSet" && o.Metadata.Name == "fastpath-agent" {
			c := o.Spec.Template.Spec.Containers[0]
			g.Expect(c.SecurityContext).To(HaveKeyWithValue("capabilities", HaveKeyWithValue("add", []any{"NET_ADMIN"})))
			g.Expect(c.Args).To(ContainElement("--dhcp=false"))
			g.Expect(c.VolumeMounts).NotTo(ContainElement(HaveField("Name", "cni-leases")))
			g.Expect(c.VolumeMounts).NotTo(ContainElement(HaveField("Name", "cni-ipam")))
		}
	}
	cmd := exec.Command("../../bin/helm", "template", "fp", ".", "--set", "agent.tuneSysctls=true")
	b, err := cmd.CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("agent.tuneSysctls needs a writable /proc/sys"))
	g.Expect(helm(t, "template", "fp", ".", "--set", "agent.tuneSysctls=true", "--set", "agent.privileged=true")).To(MatchRegexp(`privileged:\s*true`))
}

// agentDaemonSet renders the agent's DaemonSet with set.
func agentDaemonSet(t *testing.T, set ...string) string {
	t.Helper()
	args := []string{"template", "fp", ".", "--namespace", "fastpath-system", "--show-only", "templates/agent.yaml"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	for _, doc := range strings.Split(helm(t, args...), "\n---") {
		if strings.Contains(doc, "kind: DaemonSet") {
			return doc
		}
	}
	t.Fatal("no DaemonSet in templates/agent.yaml")
	return ""
}

func TestChartAgentDevicePlugin(t *testing.T) {
	g := NewWithT(t)
	ds := agentDaemonSet(t)
	g.Expect(ds).To(ContainSubstring("- --device-plugin-dir=/var/lib/kubelet/device-plugins"))
	g.Expect(ds).To(ContainSubstring("- --macvtap-devices=128"))
	g.Expect(ds).To(ContainSubstring("{name: device-plugins, mountPath: /var/lib/kubelet/device-plugins}"))
	// The macvtap device plugin asks kubelet's PodResources API whose
	// container holds a device before kubelet starts it.
	g.Expect(ds).To(ContainSubstring("- --pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock"))
	g.Expect(ds).To(ContainSubstring("{name: pod-resources, mountPath: /var/lib/kubelet/pod-resources}"))
	g.Expect(ds).To(ContainSubstring("{name: pod-resources, hostPath: {path: /var/lib/kubelet/pod-resources, type: Directory}}"))
	ds = agentDaemonSet(t, "agent.devicePlugin.enabled=false")
	g.Expect(ds).To(ContainSubstring("- --device-plugin-dir=\n"))
	g.Expect(ds).NotTo(ContainSubstring("device-plugins, mountPath"))
	g.Expect(ds).NotTo(ContainSubstring("pod-resources"))
}

// TestChartAgentSibling: vsock mode Sibling is opt-in; on, the agent gets
// the backend, its socket directory at the host path (the device plugin
// hands kubelet host paths below it), kubelet's PodResources API and the
// caps on groups (agent.sibling.maxGroups, maxGroupsPerNamespace), and the
// chart refuses it without the device plugin.
func TestChartAgentSibling(t *testing.T) {
	g := NewWithT(t)
	ds := agentDaemonSet(t)
	g.Expect(ds).NotTo(ContainSubstring("--vhost-device-vsock"))
	g.Expect(ds).NotTo(ContainSubstring("--sibling-backend-socket"))
	ds = agentDaemonSet(t, "agent.sibling.enabled=true")
	// The backend pod runs vhost-device-vsock (vsockbackend_test.go), not the agent.
	g.Expect(ds).NotTo(ContainSubstring("--vhost-device-vsock"))
	for _, s := range []string{
		"- --sibling-backend-socket=/var/run/fastpath/vsock/backend/control.sock",
		"- --sibling-socket-dir=/var/run/fastpath/vsock",
		"- --sibling-devices=128",
		"- --sibling-max-groups=64",
		"- --sibling-max-groups-per-namespace=16",
		"- --pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock",
		"{name: sibling-sockets, mountPath: /var/run/fastpath/vsock}",
		"{name: pod-resources, mountPath: /var/lib/kubelet/pod-resources}",
		"{name: sibling-sockets, hostPath: {path: /var/run/fastpath/vsock, type: DirectoryOrCreate}}",
		"{name: pod-resources, hostPath: {path: /var/lib/kubelet/pod-resources, type: Directory}}",
	} {
		g.Expect(ds).To(ContainSubstring(s))
	}
	// The earlier key of kubelet's PodResources directory still counts.
	ds = agentDaemonSet(t, "agent.sibling.enabled=true", "agent.sibling.podResourcesDir=/srv/kubelet/pod-resources")
	g.Expect(ds).To(ContainSubstring("{name: pod-resources, hostPath: {path: /srv/kubelet/pod-resources, type: Directory}}"))
	ds = agentDaemonSet(t, "agent.sibling.enabled=true", "agent.sibling.maxGroups=5", "agent.sibling.maxGroupsPerNamespace=2")
	g.Expect(ds).To(And(ContainSubstring("- --sibling-max-groups=5\n"), ContainSubstring("- --sibling-max-groups-per-namespace=2\n")))
	b, err := exec.Command("../../bin/helm", "template", "fp", ".", "--set", "agent.sibling.enabled=true", "--set", "agent.devicePlugin.enabled=false").CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(b)).To(ContainSubstring("agent.sibling.enabled needs agent.devicePlugin.enabled"))
}

// TestChartAgentRelayNamespaceCap: agent.relay.maxConnsPerNamespace passes
// the relay's per-namespace connection cap to whichever process runs the
// relay: the vsock backend by default, the agent with
// agent.relay.backend.enabled=false; by default (0) the relay derives it (a
// quarter of the node's cap) and the chart passes nothing.
func TestChartAgentRelayNamespaceCap(t *testing.T) {
	g := NewWithT(t)
	g.Expect(agentDaemonSet(t, "agent.relay.backend.enabled=false")).NotTo(ContainSubstring("--relay-max-conns-per-namespace"))
	g.Expect(agentDaemonSet(t, "agent.relay.backend.enabled=false", "agent.relay.maxConnsPerNamespace=64")).To(ContainSubstring("- --relay-max-conns-per-namespace=64\n"))
	g.Expect(agentDaemonSet(t, "agent.relay.maxConnsPerNamespace=64")).NotTo(ContainSubstring("--relay-max-conns-per-namespace"), "the backend's flag by default")
	g.Expect(daemonSets(t, "agent.relay.maxConnsPerNamespace=64")["fastpath-vsock-backend"].Spec.Template.Spec.Containers[0].Args).To(
		ContainElement("--relay-max-conns-per-namespace=64"))
}

// TestChartCleansTheNodesOnUninstall: by default a pre-delete hook Job runs
// the operator binary with --cleanup-nodes on the release's agent DaemonSet,
// under a ServiceAccount of its own that may get and update that one
// DaemonSet only; the ServiceAccount and its Role are hooks created before
// the Job. cleanup.onUninstall=false renders none of it.
func TestChartCleansTheNodesOnUninstall(t *testing.T) {
	g := NewWithT(t)
	objs := map[string]renderedObject{}
	for _, o := range render(t) {
		objs[o.Kind+"/"+o.Metadata.Name] = o
	}
	job, ok := objs["Job/fastpath-node-cleanup"]
	g.Expect(ok).To(BeTrue())
	g.Expect(job.Metadata.Annotations).To(HaveKeyWithValue("helm.sh/hook", "pre-delete"))
	g.Expect(job.Spec.Template.Spec.Containers).To(HaveLen(1))
	g.Expect(job.Spec.Template.Spec.Containers[0].Args).To(ConsistOf("--cleanup-nodes=fastpath-system/fastpath-agent", "--cleanup-timeout=4m"))
	g.Expect(objs).To(HaveKey("DaemonSet/fastpath-agent"), "the DaemonSet the hook switches")
	for _, name := range []string{"ServiceAccount/fastpath-node-cleanup", "Role/fastpath-node-cleanup", "RoleBinding/fastpath-node-cleanup"} {
		o, ok := objs[name]
		g.Expect(ok).To(BeTrue(), name)
		g.Expect(o.Metadata.Annotations).To(And(HaveKeyWithValue("helm.sh/hook", "pre-delete"), HaveKeyWithValue("helm.sh/hook-weight", "-10")), name)
	}
	role := objs["Role/fastpath-node-cleanup"]
	g.Expect(role.Rules).To(HaveLen(1))
	g.Expect(role.Rules[0].Resources).To(Equal([]string{"daemonsets"}))
	g.Expect(role.Rules[0].ResourceNames).To(Equal([]string{"fastpath-agent"}))
	g.Expect(role.Rules[0].Verbs).To(ConsistOf("get", "update"))
	for _, o := range render(t, "cleanup.onUninstall=false") {
		g.Expect(o.Metadata.Name).NotTo(Equal("fastpath-node-cleanup"), o.Kind)
	}
}

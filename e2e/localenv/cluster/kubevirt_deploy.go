package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/e2e/localenv/kvmprobe"
)

// KubeVirtNamespace is where the rendered manifests put KubeVirt
// (manifest-templator --namespace, hack/setup.sh kubevirt).
const KubeVirtNamespace = "kubevirt"

// KubeVirtFeatureGates are the feature gates Fastpath needs of KubeVirt:
// VSOCK for autoattachVSOCK (vsock mode Relay). Not Sidecar: the domain hook
// runs as the sidecar of Fastpath's network binding plugin, which needs no
// gate (binding plugins are GA since KubeVirt v1.5); the e2e suite asserts
// the Sidecar gate is off.
var KubeVirtFeatureGates = []string{"VSOCK"}

// kvmProbeTimeout bounds the KVM probe: under TCG the guest kernel prints
// its banner in under a second; under a KVM that cannot run Linux it never
// does.
const kvmProbeTimeout = 20 * time.Second

// deployKubeVirt installs KubeVirt from o.KubeVirtDir as its docs say:
// kubectl apply of kubevirt-operator.yaml, virt-operator Ready, then the
// KubeVirt CR, then wait until the CR is Available (virt-operator has
// deployed virt-api, virt-controller and virt-handler and they are ready).
// The CR is kubevirt-cr.yaml with useEmulation set from a boot probe and
// KubeVirtFeatureGates. Each stage is a step with its duration.
func (u *upper) deployKubeVirt(ctx context.Context) error {
	o := u.o
	version := filepath.Base(o.KubeVirtDir)
	operatorYAML := filepath.Join(o.KubeVirtDir, "kubevirt-operator.yaml")
	cp := o.NodeName
	if len(u.state.Nodes) > 0 { // the first node, as kind's control-plane node
		cp = u.state.Nodes[0].Name
	}
	if err := u.step("node "+cp+" labelled "+ControlPlaneLabel+" (as kubeadm does)", func() error {
		return labelControlPlane(ctx, u.c, cp)
	}); err != nil {
		return err
	}
	if err := u.step("KubeVirt "+version+": kubectl apply "+filepath.Base(operatorYAML)+", virt-operator Ready", func() error {
		applied := filepath.Join(u.l.dir, "kubevirt-operator.yaml")
		if err := writeOperatorManifest(operatorYAML, applied); err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, filepath.Join(o.BinDir, "kubectl"), "--kubeconfig", u.l.adminKubeconfig,
			"apply", "--server-side", "-f", applied)
		out, err := cmd.CombinedOutput()
		_ = os.WriteFile(filepath.Join(u.l.logs, "kubevirt-operator-apply.log"), out, 0o644)
		if err != nil {
			return fmt.Errorf("kubectl apply -f %s: %w: %s", operatorYAML, err, lastLines(out, 5))
		}
		return u.waitFor(ctx, "virt-operator", 5*time.Minute, deploymentReady(u.c, KubeVirtNamespace, "virt-operator"))
	}); err != nil {
		return err
	}
	kv, err := readKubeVirtCR(filepath.Join(o.KubeVirtDir, "kubevirt-cr.yaml"))
	if err != nil {
		return err
	}
	var emulation bool
	if err := u.step("KVM probe: boot the guest kernel under -accel kvm", func() error {
		ok, detail, err := kvmprobe.Boots(ctx, "qemu-system-x86_64", "kvm", filepath.Join(o.BinDir, "guest", "vmlinuz"), kvmProbeTimeout)
		if err != nil {
			return err
		}
		emulation = !ok
		fmt.Fprintf(o.Out, "cluster: KVM probe: %s: useEmulation %t\n", detail, emulation)
		return nil
	}); err != nil {
		return err
	}
	configureKubeVirt(kv, emulation)
	if err := u.step(fmt.Sprintf("KubeVirt CR (useEmulation %t, feature gates %s)", emulation, strings.Join(KubeVirtFeatureGates, ",")), func() error {
		return u.c.Create(ctx, kv)
	}); err != nil {
		return err
	}
	return u.step("KubeVirt Available: virt-api, virt-controller, virt-handler ready", func() error {
		return u.waitFor(ctx, "the KubeVirt CR to be Available", 15*time.Minute, kubevirtAvailable(u.c, kv.Name))
	})
}

// ControlPlaneLabel is the label kubeadm gives control-plane nodes. The
// one node is one, and virt-operator's Deployment requires it (a required
// node affinity on it or on the older node-role.kubernetes.io/master);
// NodeRestriction keeps the kubelet from setting it itself.
const ControlPlaneLabel = "node-role.kubernetes.io/control-plane"

func labelControlPlane(ctx context.Context, c client.Client, name string) error {
	n := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[ControlPlaneLabel] = ""
	return c.Patch(ctx, n, patch)
}

// VirtInContainerEnv is the virt-operator variable that passes
// VIRT_IN_CONTAINER=true to virt-handler (KubeVirt's PassthroughEnvPrefix
// KV_IO_EXTRA_ENV_, pkg/virt-operator/util/config.go). With it virt-handler
// enters its parent's mount namespace (/proc/<ppid>/ns/mnt, the containerd
// shim's: the node's) instead of /proc/1/ns/mnt, which on these machines no
// process may open, root included: PID 1 is the sandbox's own process, and
// virt-handler panics at start ("failed to detect the presence of
// selinux") when virt-chroot cannot enter it.
const VirtInContainerEnv = "KV_IO_EXTRA_ENV_VIRT_IN_CONTAINER"

// writeOperatorManifest copies the rendered kubevirt-operator.yaml to dst
// with VirtInContainerEnv=true added to virt-operator's environment, the
// edit KubeVirt documents for a node whose PID 1 is not the host's init.
func writeOperatorManifest(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("failed to read the KubeVirt operator manifest (make setup-kubevirt renders it): %w", err)
	}
	// The env list of the virt-operator container opens with
	// VIRT_OPERATOR_IMAGE (manifests/release/kubevirt-operator.yaml.in).
	anchor := regexp.MustCompile(`(?m)^( +)- name: VIRT_OPERATOR_IMAGE\n`)
	locs := anchor.FindAllSubmatchIndex(b, -1)
	if len(locs) != 1 {
		return fmt.Errorf("%s: found %d virt-operator env lists opening with VIRT_OPERATOR_IMAGE, want 1", src, len(locs))
	}
	indent := string(b[locs[0][2]:locs[0][3]])
	add := indent + "- name: " + VirtInContainerEnv + "\n" + indent + "  value: \"true\"\n"
	out := append(append(append([]byte{}, b[:locs[0][0]]...), add...), b[locs[0][0]:]...)
	return os.WriteFile(dst, out, 0o644)
}

// readKubeVirtCR decodes the rendered KubeVirt CR.
func readKubeVirtCR(path string) (*kubevirtv1.KubeVirt, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the KubeVirt CR (make setup-kubevirt renders it): %w", err)
	}
	kv := &kubevirtv1.KubeVirt{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(kv); err != nil {
		return nil, fmt.Errorf("failed to parse %s: %w", path, err)
	}
	if kv.Name == "" || kv.Namespace != KubeVirtNamespace {
		return nil, fmt.Errorf("%s holds no KubeVirt CR in namespace %s", path, KubeVirtNamespace)
	}
	return kv, nil
}

// virtAPIProbeTimeoutSeconds is the readiness probe timeout this cluster
// gives virt-api (virt-operator renders 1 s, KubeVirt v1.7.0
// pkg/virt-operator/resource/generate/components/deployments.go). virt-api's
// healthz asks the API server in turn; on this 2-core machine, with TCG
// guests and the suite's own work on the same cores, it took over a second
// three times in a row (node1's kubelet, 11:21 on 2026-11-29): the pod went
// NotReady for 24 s, and with it virt-api's subresources (virtctl restart
// answered 503) and its webhooks, which fail closed (a VMI's creation
// refused). A node of a real cluster has the cores to answer in time.
const virtAPIProbeTimeoutSeconds = 10

// configureKubeVirt sets what this cluster needs on the rendered CR:
// useEmulation where KVM cannot boot a guest, KubeVirtFeatureGates added to
// the ones it has, and virt-api's readiness probe timeout
// (virtAPIProbeTimeoutSeconds) as a customizeComponents patch, KubeVirt's
// documented way to change what virt-operator deploys.
func configureKubeVirt(kv *kubevirtv1.KubeVirt, emulation bool) {
	patch := kubevirtv1.CustomizeComponentsPatch{
		ResourceName: "virt-api", ResourceType: "Deployment", Type: kubevirtv1.StrategicMergePatchType,
		Patch: fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"virt-api","readinessProbe":{"timeoutSeconds":%d}}]}}}}`, virtAPIProbeTimeoutSeconds),
	}
	if !slices.Contains(kv.Spec.CustomizeComponents.Patches, patch) {
		kv.Spec.CustomizeComponents.Patches = append(kv.Spec.CustomizeComponents.Patches, patch)
	}
	if kv.Spec.Configuration.DeveloperConfiguration == nil {
		kv.Spec.Configuration.DeveloperConfiguration = &kubevirtv1.DeveloperConfiguration{}
	}
	dc := kv.Spec.Configuration.DeveloperConfiguration
	dc.UseEmulation = emulation
	if emulation {
		kv.Spec.Configuration.ObsoleteCPUModels = emulationObsoleteCPUModels()
	}
	for _, g := range KubeVirtFeatureGates {
		if !slices.Contains(dc.FeatureGates, g) {
			dc.FeatureGates = append(dc.FeatureGates, g)
		}
	}
}

// defaultObsoleteCPUModels is virt-handler's node labeller's list of
// obsolete x86 CPU models, used when the CR sets none
// (pkg/virt-handler/node-labeller/util DefaultObsoleteCPUModels, v1.7.0).
var defaultObsoleteCPUModels = []string{
	"486", "pentium", "pentium2", "pentium3", "pentiumpro", "coreduo", "n270", "core2duo", "Conroe",
	"athlon", "phenom", "qemu64", "qemu32", "kvm64", "kvm32", "Opteron_G1", "Opteron_G2",
}

// emulationObsoleteCPUModels is defaultObsoleteCPUModels (with their -v1
// aliases) without kvm64: under TCG libvirt's host model is kvm64, and the
// labeller leaves an obsolete model out of the cpu-model-migration labels
// while a host-model VMI's migration target requires
// cpu-model-migration.node.kubevirt.io/<host model>: with kvm64 obsolete,
// no node can ever take a migrating VMI.
func emulationObsoleteCPUModels() map[string]bool {
	m := map[string]bool{}
	for _, c := range defaultObsoleteCPUModels {
		if c != "kvm64" {
			m[c], m[c+"-v1"] = true, true
		}
	}
	return m
}

// deploymentReady is true once the Deployment has all its replicas ready;
// until then its error names the pods that are not.
func deploymentReady(c client.Client, ns, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if d.Status.ReadyReplicas >= want {
			return true, nil
		}
		return false, podProblems(ctx, c, ns)
	}
}

// kubevirtAvailable is true once the KubeVirt CR's Available condition is
// True; until then its error gives the CR's phase and conditions and the
// pods of KubeVirtNamespace that are not ready.
func kubevirtAvailable(c client.Client, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		kv := &kubevirtv1.KubeVirt{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: KubeVirtNamespace, Name: name}, kv); err != nil {
			return false, err
		}
		var conds []string
		for _, cond := range kv.Status.Conditions {
			if cond.Type == kubevirtv1.KubeVirtConditionAvailable && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
			conds = append(conds, fmt.Sprintf("%s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message))
		}
		sort.Strings(conds)
		perr := podProblems(ctx, c, KubeVirtNamespace)
		return false, fmt.Errorf("KubeVirt phase %q, conditions %s; pods: %v", kv.Status.Phase, strings.Join(conds, "; "), perr)
	}
}

// lastLines returns the last n lines of b.
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

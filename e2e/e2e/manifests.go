package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Objects are what the suite applies: the samples, adapted to the suite
// (namespace, bridge, subnet, vsock mode, short benchmark), and one VM
// outside the attachment (with a vsock CID of its own in mode Relay).
type Objects struct {
	VMs        []*kubevirtv1.VirtualMachine
	Outsider   *kubevirtv1.VirtualMachine
	Network    *fastpathv1alpha1.FastPathNetwork
	Attachment *fastpathv1alpha1.FastPathAttachment
	Benchmark  *fastpathv1alpha1.FastPathBenchmark
	Secrets    []*corev1.Secret
}

// VMSamplesEnv names a directory whose VirtualMachines replace those of
// config/samples (make e2e-cluster KUBEVIRT=1 sets it to
// config/samples/cluster/kubevirt: VMs that boot the local guest image, since
// that cluster pulls no disk image).
const VMSamplesEnv = "FASTPATH_E2E_VM_SAMPLES"

// LoadSamples reads config/samples/*.yaml of the repository at root, with
// the VirtualMachines of $FASTPATH_E2E_VM_SAMPLES/*.yaml instead of its own
// when that is set, and the attachment of config/samples/vsock/ (db-link
// with a vsock service) instead of the plain one: the suite tests vsock.
func LoadSamples(root string) (Objects, error) {
	var o Objects
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	if err != nil {
		return o, err
	}
	vsockFiles, err := filepath.Glob(filepath.Join(root, "config", "samples", "vsock", "*.yaml"))
	if err != nil || len(vsockFiles) == 0 {
		return o, fmt.Errorf("failed to find the vsock attachment in config/samples/vsock: %v", err)
	}
	files = append(files, vsockFiles...)
	vmDir := os.Getenv(VMSamplesEnv)
	if vmDir != "" {
		vms, err := filepath.Glob(filepath.Join(vmDir, "*.yaml"))
		if err != nil || len(vms) == 0 {
			return o, fmt.Errorf("failed to find VirtualMachine samples in %s=%s: %v", VMSamplesEnv, vmDir, err)
		}
		files = append(files, vms...)
	}
	for _, f := range files {
		fromVMDir := vmDir != "" && filepath.Dir(f) == filepath.Clean(vmDir)
		b, err := os.ReadFile(f)
		if err != nil {
			return o, fmt.Errorf("failed to read %s: %w", f, err)
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				return o, fmt.Errorf("failed to parse %s: %w", f, err)
			}
			switch tm.Kind {
			case "VirtualMachine":
				if vmDir != "" && !fromVMDir {
					continue
				}
				vm := &kubevirtv1.VirtualMachine{}
				if err := yaml.UnmarshalStrict([]byte(doc), vm); err != nil {
					return o, fmt.Errorf("failed to parse VirtualMachine in %s: %w", f, err)
				}
				o.VMs = append(o.VMs, vm)
			case "FastPathNetwork":
				o.Network = &fastpathv1alpha1.FastPathNetwork{}
				if err := yaml.UnmarshalStrict([]byte(doc), o.Network); err != nil {
					return o, fmt.Errorf("failed to parse FastPathNetwork in %s: %w", f, err)
				}
			case "FastPathAttachment":
				o.Attachment = &fastpathv1alpha1.FastPathAttachment{}
				if err := yaml.UnmarshalStrict([]byte(doc), o.Attachment); err != nil {
					return o, fmt.Errorf("failed to parse FastPathAttachment in %s: %w", f, err)
				}
			case "FastPathBenchmark":
				o.Benchmark = &fastpathv1alpha1.FastPathBenchmark{}
				if err := yaml.UnmarshalStrict([]byte(doc), o.Benchmark); err != nil {
					return o, fmt.Errorf("failed to parse FastPathBenchmark in %s: %w", f, err)
				}
			}
		}
	}
	if len(o.VMs) < 2 || o.Network == nil || o.Attachment == nil || o.Benchmark == nil {
		return o, fmt.Errorf("failed to find two VMs, a FastPathNetwork, a FastPathAttachment and a FastPathBenchmark in config/samples")
	}
	if o.Attachment.Spec.VSOCK == nil {
		return o, fmt.Errorf("failed to find the vsock attachment: the last FastPathAttachment read (config/samples/vsock/) has no spec.vsock")
	}
	return o, nil
}

// Adapt puts the objects in namespace ns and makes them the suite's: a
// FastPathNetwork e2e-<ns> for ns only on the node bridge given, the subnet given (so the suite does not collide with a demo on the
// same machine), cloud-init that also installs socat and ethtool (used on a
// real cluster), a benchmark of 2-second runs, an outsider VM, and the SSH
// key Secrets from the key pair given.
func (o *Objects) Adapt(ns, bridge, subnet string, mode fastpathv1alpha1.VSOCKMode, privateKey, publicKey []byte) {
	for _, vm := range o.VMs {
		vm.Namespace = ns
		for i, v := range vm.Spec.Template.Spec.Volumes {
			if v.CloudInitNoCloud != nil {
				vm.Spec.Template.Spec.Volumes[i].CloudInitNoCloud.UserData = strings.Replace(v.CloudInitNoCloud.UserData, "packages: [netperf]", "packages: [netperf, socat, ethtool]", 1)
			}
		}
	}
	out := o.VMs[0].DeepCopy()
	out.Name = "outsider"
	out.Labels = map[string]string{"app": "outsider"}
	out.Spec.Template.ObjectMeta.Labels = map[string]string{"app": "outsider"}
	if mode != fastpathv1alpha1.VSOCKModeSibling {
		// KubeVirt's kernel vsock device, as the Relay attachment's VMs get.
		// In mode Sibling the outsider has no vsock device at all: the
		// attachment's vhost-user group is the only vsock path there is.
		yes := true
		out.Spec.Template.Spec.Domain.Devices.AutoattachVSOCK = &yes
	}
	o.Outsider = out

	// The network is cluster-scoped: named after the suite's namespace and
	// admitting only it.
	o.Network.Name = "e2e-" + ns
	o.Network.Spec.Bridge = bridge
	o.Network.Spec.NamespaceSelector = metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}

	a := o.Attachment
	a.Namespace = ns
	a.Spec.NetworkRef = &fastpathv1alpha1.NetworkReference{Name: o.Network.Name}
	a.Spec.Network.IPAM.Subnet = subnet
	if a.Spec.VSOCK != nil {
		a.Spec.VSOCK.Mode = mode
	}

	b := o.Benchmark
	b.Namespace = ns
	b.Spec.Duration = &metav1.Duration{Duration: 2 * time.Second}
	reps := int32(3)
	b.Spec.Repetitions = &reps

	o.Secrets = []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: b.Spec.SSHKeySecretRef.Name, Namespace: ns}, Data: map[string][]byte{"ssh-privatekey": privateKey}},
	}
	for _, vm := range o.VMs {
		for _, ac := range vm.Spec.Template.Spec.AccessCredentials {
			if ac.SSHPublicKey != nil && ac.SSHPublicKey.Source.Secret != nil {
				name := ac.SSHPublicKey.Source.Secret.SecretName
				if !hasSecret(o.Secrets, name) {
					o.Secrets = append(o.Secrets, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{"key": publicKey}})
				}
			}
		}
	}
}

func hasSecret(ss []*corev1.Secret, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}

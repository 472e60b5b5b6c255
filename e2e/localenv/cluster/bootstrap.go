package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/e2e/localenv/images"
	fpscheme "github.com/fastpath-io/fastpath/internal/platform/scheme"
)

// fieldOwner is the server-side-apply field manager of what Up applies.
const fieldOwner = client.FieldOwner("fastpath-cluster")

// adminClient returns a direct client of the cluster with Fastpath's scheme.
func adminClient(kubeconfig string) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %s: %w", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: fpscheme.New()})
	if err != nil {
		return nil, fmt.Errorf("failed to create a client from %s: %w", kubeconfig, err)
	}
	return c, nil
}

// MultusManifest returns the path of deployments/multus-daemonset.yml in
// the module cache for MultusModule@MultusVersion (downloading the module if
// needed: `go mod download`).
func MultusManifest(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", MultusModule+"@"+MultusVersion)
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("failed to find Multus %s in the Go module cache (go mod download): %w: %s", MultusVersion, err, strings.TrimSpace(stderr.String()))
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("failed to read go mod download's answer for Multus %s: %v: %s", MultusVersion, err, out)
	}
	return filepath.Join(m.Dir, "deployments", "multus-daemonset.yml"), nil
}

// multusObjects reads the NetworkAttachmentDefinition CRD and the ClusterRole
// "multus" from Multus's own deployment manifest (its DaemonSet,
// ServiceAccount and ConfigMap are not used: the thin plugin runs as a
// binary from the runtime's CNI configuration, with its own kubeconfig).
func multusObjects(manifest io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(manifest, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err == io.EOF {
				break
			}
			return nil, fmt.Errorf("failed to decode Multus's manifest: %w", err)
		}
		switch {
		case u.GetKind() == "CustomResourceDefinition" && u.GetName() == "network-attachment-definitions.k8s.cni.cncf.io",
			u.GetKind() == "ClusterRole" && u.GetName() == "multus":
			out = append(out, u)
		}
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("the Multus manifest holds %d of the 2 objects wanted (NetworkAttachmentDefinition CRD, ClusterRole multus)", len(out))
	}
	return out, nil
}

// applyMultusObjects applies Multus's CRD and ClusterRole and binds the
// ClusterRole to MultusUser, then waits for the CRD to be served.
func applyMultusObjects(ctx context.Context, c client.Client) error {
	path, err := MultusManifest(ctx)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("failed to open Multus's manifest: %w", err)
	}
	defer f.Close()
	objs, err := multusObjects(f)
	if err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "multus"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "multus"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: MultusUser}},
	}
	ub, err := toUnstructured(binding)
	if err != nil {
		return err
	}
	for _, u := range append(objs, ub) {
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
		if err := c.Patch(ctx, u, client.Apply, fieldOwner, client.ForceOwnership); err != nil { //nolint:staticcheck // client.Apply for unstructured objects
			return fmt.Errorf("failed to apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("failed to encode: %w", err)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &u.Object); err != nil {
		return nil, fmt.Errorf("failed to decode: %w", err)
	}
	return u, nil
}

// importImages imports every image make images built (e2e/localenv/images)
// into the cluster's containerd, in the CRI's namespace.
func (o Options) importImages(ctx context.Context) error {
	var log bytes.Buffer
	if err := images.Import(ctx, o.hostRoot+o.layout().containerdSock, o.ImagesDir, &log); err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(log.String()))
	}
	want := []string{SandboxImage}
	if o.KubeVirtDir != "" { // KubeVirt's images are not among the default targets
		var names []string
		for _, t := range append(images.KubeVirtTargets(), images.GuestKernelBootTarget) {
			names = append(names, t.Name)
			want = append(want, t.Ref)
		}
		if err := images.Import(ctx, o.hostRoot+o.layout().containerdSock, o.ImagesDir, &log, names...); err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(log.String()))
		}
	}
	if err := os.WriteFile(filepath.Join(o.layout().logs, "images-import.log"), log.Bytes(), 0o644); err != nil {
		return fmt.Errorf("failed to write the import log: %w", err)
	}
	out, err := o.crictl(ctx, "images", "-o", "json")
	if err != nil {
		return err
	}
	for _, ref := range want {
		if !bytes.Contains(out, []byte(ref)) {
			return fmt.Errorf("containerd lists no %s after the import (make images, make kubevirt-images; see %s)", ref, filepath.Join(o.layout().logs, "images-import.log"))
		}
	}
	return nil
}

// kubeletSysctls are the kernel settings the kubelet sets on start
// (protectKernelDefaults false: pkg/kubelet/cm setupKernelTunables); Up
// records them before and Down restores them.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func readSysctls() (map[string]string, error) {
	m := map[string]string{}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return nil, fmt.Errorf("failed to read /proc/sys/%s: %w", k, err)
		}
		m[k] = strings.TrimSpace(string(b))
	}
	return m, nil
}

// restoreSysctls writes the recorded values back and returns the settings
// that could not be restored.
func restoreSysctls(m map[string]string) []string {
	var failed []string
	for k, v := range m {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			failed = append(failed, fmt.Sprintf("/proc/sys/%s=%s: %v", k, v, err))
		}
	}
	return failed
}

package kubevirtcr

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KubeVirtGVK is the kind of the KubeVirt CR (kubevirt.io/v1 KubeVirt), the
// cluster's one KubeVirt installation.
var KubeVirtGVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "KubeVirt"}

// DefaultKubeVirt is where KubeVirt's install docs put the KubeVirt CR
// (kubevirt-cr.yaml: namespace kubevirt, name kubevirt).
var DefaultKubeVirt = types.NamespacedName{Namespace: "kubevirt", Name: "kubevirt"}

// SidecarMemoryOverhead is the computeResourceOverhead memory request each
// plugin adds to the compute container: the domain hook sidecar container
// has no request of its own (KubeVirt gives hook sidecars requests only
// when spec.configuration.supportContainerResources says so), so without it
// the scheduler would not count the sidecar at all. It is the sidecar's
// measured working set (docs/kubevirt.md, "The binding plugin"), rounded up.
var SidecarMemoryOverhead = resource.MustParse("40Mi")

// bindingPath is the path of the plugins in the KubeVirt CR.
var bindingPath = []string{"spec", "configuration", "network", "binding"}

// BindingField names a plugin's entry in the KubeVirt CR, for messages.
func BindingField(name string) string {
	return strings.Join(append(append([]string{}, bindingPath...), name), ".")
}

// Names are the plugin names the operator wires interfaces with.
type Names struct {
	// Bridge is the plugin of datapaths LinuxBridge and OVS (managedTap).
	Bridge string
	// Macvtap is the plugin of datapath Macvtap (tap).
	Macvtap string
}

// Plugins returns the KubeVirt CR entries of the plugins names, both with
// the domain hook image as sidecarImage. An empty image is an error:
// without the sidecar the attachment's ring sizes, queues and offloads
// never reach the domain.
func Plugins(names Names, sidecarImage string) (map[string]kubevirtv1.InterfaceBindingPlugin, error) {
	if sidecarImage == "" {
		return nil, fmt.Errorf("failed to build the binding plugins: the domain hook image (--domain-hook-image) is empty")
	}
	if names.Bridge == "" || names.Macvtap == "" || names.Bridge == names.Macvtap {
		return nil, fmt.Errorf("failed to build the binding plugins: names %q and %q must be two different non-empty names", names.Bridge, names.Macvtap)
	}
	overhead := &kubevirtv1.ResourceRequirementsWithoutClaims{Requests: corev1.ResourceList{corev1.ResourceMemory: SidecarMemoryOverhead}}
	return map[string]kubevirtv1.InterfaceBindingPlugin{
		names.Bridge:  {SidecarImage: sidecarImage, DomainAttachmentType: kubevirtv1.ManagedTap, ComputeResourceOverhead: overhead},
		names.Macvtap: {SidecarImage: sidecarImage, DomainAttachmentType: kubevirtv1.Tap, ComputeResourceOverhead: overhead.DeepCopy()},
	}, nil
}

// wantType is the domainAttachmentType each plugin must have.
func (n Names) wantType(name string) kubevirtv1.DomainAttachmentType {
	if name == n.Macvtap {
		return kubevirtv1.Tap
	}
	return kubevirtv1.ManagedTap
}

// Register writes plugins into the KubeVirt CR key with one JSON merge
// patch: other plugins and every other field stay as they are, and
// writing the same entries again changes nothing. Errors: the CR is
// missing or the patch is refused (RBAC, validation).
func Register(ctx context.Context, c client.Client, key types.NamespacedName, plugins map[string]kubevirtv1.InterfaceBindingPlugin) error {
	entries := map[string]any{}
	for name, p := range plugins {
		entries[name] = p
	}
	return patchBinding(ctx, c, key, entries)
}

// Unregister removes the entries names from the KubeVirt CR key and, when
// they were its only plugins, leaves the CR as it was before Register: a
// binding map left empty goes too, and so do network and configuration
// when that leaves them empty (spec stays). It reads the CR and writes one
// JSON merge patch of only what is ours: our entries by name, or the
// highest of those maps that holds nothing else, the latter with the CR's
// resourceVersion as a precondition, so that a field someone adds meanwhile
// is never dropped (on a conflict it reads the CR again). With none of
// names in the CR it writes nothing. A missing CR, or a cluster without
// KubeVirt's CRD, is not an error.
func Unregister(ctx context.Context, c client.Client, key types.NamespacedName, names ...string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		kv := &unstructured.Unstructured{}
		kv.SetGroupVersionKind(KubeVirtGVK)
		if err := c.Get(ctx, key, kv); err != nil {
			return fmt.Errorf("failed to get KubeVirt %s: %w", key, err)
		}
		patch, err := unregisterPatch(kv, names)
		if err != nil || patch == nil {
			return err
		}
		if err := c.Patch(ctx, kv, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("failed to patch %s of KubeVirt %s: %w", strings.Join(bindingPath, "."), key, err)
		}
		return nil
	})
	if client.IgnoreNotFound(err) == nil || meta.IsNoMatchError(err) {
		return nil
	}
	return err
}

// unregisterPatch returns the JSON merge patch that takes names out of the
// KubeVirt CR kv (see Unregister), or nil when kv has none of them.
func unregisterPatch(kv *unstructured.Unstructured, names []string) ([]byte, error) {
	binding, _, err := unstructured.NestedMap(kv.Object, bindingPath...)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s of KubeVirt %s/%s: %w", strings.Join(bindingPath, "."), kv.GetNamespace(), kv.GetName(), err)
	}
	ours := map[string]any{}
	for _, n := range names {
		if _, ok := binding[n]; ok {
			ours[n] = nil
			delete(binding, n)
		}
	}
	if len(ours) == 0 {
		return nil, nil
	}
	if len(binding) > 0 {
		return json.Marshal(nested(bindingPath, ours))
	}
	// Null the highest map of binding, network and configuration that holds
	// only the one below it (spec.configuration is bindingPath[:2]).
	end := len(bindingPath)
	for end > 2 {
		parent, _, _ := unstructured.NestedMap(kv.Object, bindingPath[:end-1]...)
		if len(parent) != 1 {
			break
		}
		end--
	}
	patch := nested(bindingPath[:end-1], map[string]any{bindingPath[end-1]: nil})
	patch["metadata"] = map[string]any{"resourceVersion": kv.GetResourceVersion()}
	return json.Marshal(patch)
}

// nested returns {path[0]: {path[1]: … leaf}}.
func nested(path []string, leaf map[string]any) map[string]any {
	for i := len(path) - 1; i >= 0; i-- {
		leaf = map[string]any{path[i]: leaf}
	}
	return leaf
}

func patchBinding(ctx context.Context, c client.Client, key types.NamespacedName, entries map[string]any) error {
	patch, err := json.Marshal(nested(bindingPath, entries))
	if err != nil {
		return fmt.Errorf("failed to encode the binding plugin patch: %w", err)
	}
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(KubeVirtGVK)
	kv.SetNamespace(key.Namespace)
	kv.SetName(key.Name)
	if err := c.Patch(ctx, kv, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("failed to patch %s of KubeVirt %s: %w", strings.Join(bindingPath, "."), key, err)
	}
	return nil
}

// Check returns nil when one of kubevirts (the KubeVirt CRs the cluster
// has; KubeVirt allows one) registers plugin name with a sidecarImage and
// the domainAttachmentType the datapath needs; otherwise an error that
// names the KubeVirt CR, the field and what is wrong.
func Check(kubevirts []unstructured.Unstructured, names Names, name string) error {
	if len(kubevirts) == 0 {
		return fmt.Errorf("the cluster has no KubeVirt CR (kubevirt.io/v1 KubeVirt) to register the network binding plugin %q in", name)
	}
	sort.Slice(kubevirts, func(i, j int) bool {
		return kubevirts[i].GetNamespace()+"/"+kubevirts[i].GetName() < kubevirts[j].GetNamespace()+"/"+kubevirts[j].GetName()
	})
	var problems []string
	for i := range kubevirts {
		kv := &kubevirts[i]
		ref := kv.GetNamespace() + "/" + kv.GetName()
		raw, found, err := unstructured.NestedFieldNoCopy(kv.Object, append(append([]string{}, bindingPath...), name)...)
		if err != nil || !found {
			problems = append(problems, fmt.Sprintf("KubeVirt %s has no %s", ref, BindingField(name)))
			continue
		}
		b, err := json.Marshal(raw)
		if err != nil {
			return err
		}
		var p kubevirtv1.InterfaceBindingPlugin
		if err := json.Unmarshal(b, &p); err != nil {
			problems = append(problems, fmt.Sprintf("KubeVirt %s: %s is not a binding plugin: %v", ref, BindingField(name), err))
			continue
		}
		switch want := names.wantType(name); {
		case p.SidecarImage == "":
			problems = append(problems, fmt.Sprintf("KubeVirt %s: %s has no sidecarImage (the fastpath-domain-hook image)", ref, BindingField(name)))
		case p.DomainAttachmentType != want:
			problems = append(problems, fmt.Sprintf("KubeVirt %s: %s.domainAttachmentType is %q, want %q", ref, BindingField(name), p.DomainAttachmentType, want))
		default:
			return nil
		}
	}
	return fmt.Errorf("the network binding plugin %q is not registered: %s", name, strings.Join(problems, "; "))
}

// Registered reports whether the KubeVirt CR kv carries exactly plugins
// (other plugins aside), so Register would change nothing.
func Registered(kv *unstructured.Unstructured, plugins map[string]kubevirtv1.InterfaceBindingPlugin) bool {
	for name, want := range plugins {
		raw, found, err := unstructured.NestedFieldNoCopy(kv.Object, append(append([]string{}, bindingPath...), name)...)
		if err != nil || !found {
			return false
		}
		have, err := json.Marshal(raw)
		if err != nil {
			return false
		}
		var got kubevirtv1.InterfaceBindingPlugin
		if err := json.Unmarshal(have, &got); err != nil || !equality.Semantic.DeepEqual(got, want) {
			return false
		}
	}
	return true
}

// SortedNames returns the plugin names in order, for messages.
func SortedNames(plugins map[string]kubevirtv1.InterfaceBindingPlugin) []string {
	names := make([]string, 0, len(plugins))
	for n := range plugins {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// SidecarFeatureGate is KubeVirt's feature gate for the
// hooks.kubevirt.io/hookSidecars annotation: with it any user who may create
// a VirtualMachine runs any image as a sidecar in its virt-launcher Pod.
const SidecarFeatureGate = "Sidecar"

// featureGatesPath is where a KubeVirt CR lists its feature gates.
var featureGatesPath = []string{"spec", "configuration", "developerConfiguration", "featureGates"}

// FeatureGatesField names the feature gate list, for messages.
var FeatureGatesField = strings.Join(featureGatesPath, ".")

// SidecarGateOn returns "<namespace>/<name>" of each of kubevirts that lists
// SidecarFeatureGate, sorted; none when no CR does.
func SidecarGateOn(kubevirts []unstructured.Unstructured) []string {
	var on []string
	for i := range kubevirts {
		gates, _, _ := unstructured.NestedStringSlice(kubevirts[i].Object, featureGatesPath...)
		for _, g := range gates {
			if g == SidecarFeatureGate {
				on = append(on, kubevirts[i].GetNamespace()+"/"+kubevirts[i].GetName())
				break
			}
		}
	}
	sort.Strings(on)
	return on
}

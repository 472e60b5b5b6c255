package emulation

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/internal/vm/kubevirtcr"
)

// EmulatedDomainHookImage is the sidecarImage the emulated cluster's
// binding plugins name. Emulated: no container runs it; the emulated
// virt-launcher runs bin/fastpath-domain-hook itself.
const EmulatedDomainHookImage = "localhost/fastpath-domain-hook:local"

// EnsureKubeVirtCR creates the KubeVirt CR kubevirtcr.DefaultKubeVirt
// (kubevirt/kubevirt, with its namespace) if it is missing: the emulated
// KubeVirt's installation, where the admin, or fastpath-operator with
// --register-binding-plugins, registers Fastpath's network binding plugins.
// Emulated: nothing reads its configuration but Fastpath.
func EnsureKubeVirtCR(ctx context.Context, c client.Client) error {
	key := kubevirtcr.DefaultKubeVirt
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(key.Namespace)
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create namespace %s for the KubeVirt CR: %w", key.Namespace, err)
	}
	kv := &unstructured.Unstructured{}
	kv.SetGroupVersionKind(kubevirtcr.KubeVirtGVK)
	kv.SetNamespace(key.Namespace)
	kv.SetName(key.Name)
	if err := unstructured.SetNestedField(kv.Object, true, "spec", "configuration", "developerConfiguration", "useEmulation"); err != nil {
		return err
	}
	if err := c.Create(ctx, kv); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("failed to create the KubeVirt CR %s: %w", key, err)
	}
	return nil
}

// RegisterBindingPlugins is EnsureKubeVirtCR followed by what an admin
// does: Fastpath's network binding plugins (default names) registered in
// the CR with EmulatedDomainHookImage.
func RegisterBindingPlugins(ctx context.Context, c client.Client) error {
	if err := EnsureKubeVirtCR(ctx, c); err != nil {
		return err
	}
	plugins, err := kubevirtcr.Plugins(kubevirtcr.Names{Bridge: "fastpath", Macvtap: "fastpath-macvtap"}, EmulatedDomainHookImage)
	if err != nil {
		return err
	}
	return kubevirtcr.Register(ctx, c, kubevirtcr.DefaultKubeVirt, plugins)
}

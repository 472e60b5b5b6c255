package hostcpu

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LaunchersOn returns a Handler.Allowed that admits the pods bound to node
// whose controller is a KubeVirt VirtualMachineInstance (virt-launcher
// pods), read through r (the agent's cache holds this node's pods only,
// nodeagent.CacheOptions). Labels are not trusted: any pod may carry
// kubevirt.io=virt-launcher.
func LaunchersOn(r client.Reader, node string) func(ctx context.Context, uid string) error {
	return func(ctx context.Context, uid string) error {
		pods := &corev1.PodList{}
		if err := r.List(ctx, pods); err != nil {
			return fmt.Errorf("failed to list the pods of node %s: %w", node, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if string(p.UID) != uid {
				continue
			}
			owner := metav1.GetControllerOf(p)
			if p.Spec.NodeName != node || owner == nil || owner.Kind != "VirtualMachineInstance" || !strings.HasPrefix(owner.APIVersion, kubevirtv1.SchemeGroupVersion.Group+"/") {
				break
			}
			return nil
		}
		return fmt.Errorf("pod %s is not a virt-launcher pod on node %s", uid, node)
	}
}

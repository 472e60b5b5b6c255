package deviceplugin

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// EventSiblingBackendReplaced: the vhost-device-vsock process serving the
// VM started after the VM's QEMU connected to the previous one (the node's
// vsock backend restarted or was replaced); QEMU does not reconnect a
// vhost-user-vsock device, so the VM's vsock is down until it restarts.
// Sent as a Warning on the launcher pod and on the VMI.
const EventSiblingBackendReplaced = "SiblingBackendReplaced"

// computeContainer is the name of KubeVirt's virt-launcher container that
// runs QEMU.
const computeContainer = "compute"

// linkChange is what link did to a device's directory.
type linkChange int

const (
	// linkUnchanged: the directory already held the socket.
	linkUnchanged linkChange = iota
	// linkNew: the directory held no socket; now it holds the VM's.
	linkNew
	// linkReplaced: the directory held another socket of the VM (the
	// backend bound a new one: its QEMU left, or the process restarted).
	linkReplaced
)

// ServedSinceFunc returns when the vhost-device-vsock process that serves
// the vhost-user socket named socket (its base name) started; zero when
// none serves it. Errors: the backend could not be asked.
type ServedSinceFunc func(ctx context.Context, socket string) (time.Time, error)

// backendReplaced runs after the link of pod's device id was replaced (the
// backend bound a new socket for VM ns/vm, pod.Namespace). When the process
// serving the new socket started after the pod's compute container did,
// the pod's QEMU was connected to a process that is gone and will not
// reconnect: it says so with an EventSiblingBackendReplaced Warning on the
// pod and the VMI, once per replaced link. A new socket bound because the
// pod's QEMU left (the VM stopping, or the source of a migration) comes
// from the process the QEMU used, started before the container: no event.
func (m *SiblingMounts) backendReplaced(ctx context.Context, pod types.NamespacedName, vm, id string) {
	if m.ServedSince == nil {
		return
	}
	socket := filepath.Base(fastpathv1alpha1.SiblingSocketPath(pod.Namespace, vm))
	log := m.Log.WithValues("device", id, "pod", pod.String(), "vm", pod.Namespace+"/"+vm)
	since, err := m.ServedSince(ctx, socket)
	if err != nil || since.IsZero() {
		log.Info("The backend bound a new vhost-user socket; its process could not be told", "error", fmt.Sprint(err))
		return
	}
	obj := &corev1.Pod{}
	if err := m.Reader.Get(ctx, pod, obj); err != nil {
		log.Error(err, "Failed to read the launcher pod after its vhost-user socket was replaced")
		return
	}
	var started time.Time
	for _, c := range obj.Status.ContainerStatuses {
		if c.Name == computeContainer && c.State.Running != nil {
			started = c.State.Running.StartedAt.Time
		}
	}
	if started.IsZero() || !started.Before(since) {
		return
	}
	msg := fmt.Sprintf("the vsock of VM %s/%s is down until the VM restarts (virtctl restart %s -n %s): the node's vsock backend restarted or was replaced, "+
		"and the vhost-device-vsock process now serving the VM started at %s, after this launcher's QEMU connected to the previous one (compute container running since %s); "+
		"QEMU does not reconnect a vhost-user-vsock device, so the VM's vsock connections ended with the previous process and new ones get no answer",
		pod.Namespace, vm, vm, pod.Namespace, since.UTC().Format(time.RFC3339), started.UTC().Format(time.RFC3339))
	log.Info("A Sibling VM's vsock backend was replaced under its running QEMU; the VM needs a restart", "processStarted", since, "computeStarted", started)
	if m.Recorder == nil {
		return
	}
	obj.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"} // a reader may leave it empty
	m.Recorder.Event(obj, corev1.EventTypeWarning, EventSiblingBackendReplaced, msg)
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := m.Reader.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: vm}, vmi); err != nil {
		log.Error(err, "Failed to read the VMI for its event")
		return
	}
	vmi.SetGroupVersionKind(kubevirtv1.VirtualMachineInstanceGroupVersionKind)
	m.Recorder.Event(vmi, corev1.EventTypeWarning, EventSiblingBackendReplaced, msg)
}

package deviceplugin_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSiblingBackendReplacedUnderARunningQEMU: the backend binds a new
// socket for a running VM in two cases. Its QEMU left (the VM stops), and
// the process that served it goes on: nothing to say. Or the process was
// restarted or replaced after the QEMU connected, which QEMU never
// reconnects to: a Warning on the launcher pod and on the VMI says the VM's
// vsock is down until it restarts. A first link says nothing of the kind.
func TestSiblingBackendReplacedUnderARunningQEMU(t *testing.T) {
	computeStarted := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		processStarted time.Time
		running        bool
		want           bool
	}{
		{"the process restarted after QEMU connected", computeStarted.Add(time.Hour), true, true},
		{"QEMU left the process it connected to", computeStarted.Add(-time.Hour), true, false},
		{"the compute container is not running", computeStarted.Add(time.Hour), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			vm, att := siblingWiring("tenant-a", "db-0")
			pod := launcher("tenant-a", "virt-launcher-db-0-abcde", "uid-pod-0", "db-0", "uid-vmi-0", testNode)
			if tc.running {
				pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "compute", State: corev1.ContainerState{
					Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(computeStarted)}}}}
			}
			e := newSiblingEnv(t, siblingVMI("tenant-a", "db-0", "uid-vmi-0", "uid-pod-0"), pod, vm, att)
			e.events.IncludeObject = true
			var asked []string
			started := computeStarted.Add(-2 * time.Hour)
			e.mounts.ServedSince = func(_ context.Context, socket string) (time.Time, error) {
				asked = append(asked, socket)
				return started, nil
			}
			s := e.serve("tenant-a", "db-0")
			e.allocate("vsock0")
			e.res.set(map[string]string{"vsock0": "tenant-a/virt-launcher-db-0-abcde"})
			g.Expect(e.preStart("vsock0")).To(Succeed())
			g.Expect(<-e.events.Events).To(ContainSubstring("SiblingSocketLinked"))
			g.Expect(e.mounts.Sync(context.Background())).To(Succeed())
			g.Expect(asked).To(BeEmpty(), "no socket was replaced")

			started = tc.processStarted
			e.restart(s)
			g.Expect(e.mounts.Sync(context.Background())).To(Succeed())
			g.Expect(asked).To(Equal([]string{filepath.Base(s)}))
			g.Expect(e.entries("vsock0")).To(Equal([]string{filepath.Base(s)}), "the new socket is linked for the next start")
			if !tc.want {
				g.Expect(e.events.Events).NotTo(Receive())
				return
			}
			for _, kind := range []string{"kind=Pod", "kind=VirtualMachineInstance"} {
				var ev string
				g.Expect(e.events.Events).To(Receive(&ev))
				g.Expect(ev).To(And(HavePrefix("Warning SiblingBackendReplaced "), ContainSubstring("vsock of VM tenant-a/db-0 is down until the VM restarts"),
					ContainSubstring("virtctl restart db-0 -n tenant-a"), ContainSubstring("started at 2026-11-29T11:00:00Z"), ContainSubstring(kind)))
			}
			// Once per replaced link: the next Sync finds it in place.
			g.Expect(e.mounts.Sync(context.Background())).To(Succeed())
			g.Expect(e.events.Events).NotTo(Receive())
		})
	}
}

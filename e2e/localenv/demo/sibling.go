package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/e2e/localenv/guests"
)

// The Sibling-mode attachment the demo adds with real guests (its manifest:
// siblingManifest).
const (
	// SampleNetwork is the FastPathNetwork of config/samples/ that both the
	// samples' attachment and the Sibling attachment name in spec.networkRef.
	SampleNetwork     = "fastpath"
	SiblingAttachment = "queue-link"
	SiblingService    = "jobs"
	SiblingPort       = 5672
)

// SiblingVMs are the two VMs of SiblingAttachment; the first serves
// SiblingService.
var SiblingVMs = []string{"queue-0", "queue-1"}

// siblingManifest is what the demo applies with real guests: a
// FastPathAttachment in vsock mode Sibling and its two VMs, declared halted
// so that the operator wires them and the agent's vhost-device-vsock serves
// their slots before they boot (docs/vsock-sibling.md: declaring VMs before
// starting them means the group never restarts).
func siblingManifest() string {
	var b strings.Builder
	fmt.Fprintf(&b, `# vsock mode Sibling (docs/vsock-sibling.md): %[2]s and %[3]s reach each
# other's vsock services directly, through the node agent's vhost-device-vsock;
# no relay, no host socket. The group is the allow-list. Mode Sibling needs
# spec.network: its fast-path interface carries Fastpath's binding plugin,
# whose sidecar (the domain hook) adds the vhost-user-vsock device. That
# interface is on the admin's FastPathNetwork %[6]q of config/samples/, in a
# subnet of its own. Written by the demo.
apiVersion: fastpath.io/v1alpha1
kind: FastPathAttachment
metadata:
  name: %[1]s
spec:
  vmSelector:
    matchLabels:
      app: queue
  networkRef:
    name: %[6]s
  network:
    ipam:
      subnet: 10.251.0.0/24
  vsock:
    mode: Sibling
    services:
    - name: %[4]s
      vm: %[2]s
      port: %[5]d
`, SiblingAttachment, SiblingVMs[0], SiblingVMs[1], SiblingService, SiblingPort, SampleNetwork)
	for _, vm := range SiblingVMs {
		fmt.Fprintf(&b, `---
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: %s
  labels:
    app: queue
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        app: queue
    spec:
      domain:
        cpu: {cores: 2}
        memory: {guest: 512Mi}
        devices:
          interfaces:
          - name: default
            masquerade: {}
      networks:
      - name: default
        pod: {}
`, vm)
	}
	return b.String()
}

// startSibling applies the Sibling-mode attachment and its halted VMs,
// waits until the operator has wired the VM templates and given each VM a
// CID and the agent runs their vhost-device-vsock group, then starts the VMs
// (as `virtctl start` does) and waits for the attachment to be Ready with
// both real guests up.
func (d *demo) startSibling(ctx context.Context) error {
	d.header("vsock mode Sibling: a second attachment; the agent's vhost-device-vsock joins two more real guests directly")
	path := filepath.Join(d.outDir, "sibling.yaml")
	if err := os.WriteFile(path, []byte(siblingManifest()), 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	if _, err := d.kubectl(ctx, nil, "-n", Namespace, "apply", "-f", d.rel(path)); err != nil {
		return err
	}
	var group fastpathv1alpha1.SiblingBackendStatus
	if err := d.waitFor(ctx, 2*time.Minute, "the Sibling VMs to be wired", func() (bool, error) {
		if err := d.stack.CheckProcesses(); err != nil {
			return false, err
		}
		a := &fastpathv1alpha1.FastPathAttachment{}
		if err := d.stack.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: SiblingAttachment}, a); err != nil {
			return false, err
		}
		if err := refusal(a); err != nil {
			return false, err
		}
		cids := 0
		for _, v := range a.Status.VMs {
			if v.VSOCKMode == fastpathv1alpha1.VSOCKModeSibling && v.CID != nil {
				cids++
			}
		}
		if cids < len(SiblingVMs) {
			return false, nil
		}
		for _, name := range SiblingVMs {
			vm := &kubevirtv1.VirtualMachine{}
			if err := d.stack.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, vm); err != nil {
				return false, err
			}
			if vm.Spec.Template.ObjectMeta.Annotations[fastpathv1alpha1.VSOCKModeAnnotation] != string(fastpathv1alpha1.VSOCKModeSibling) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "(the operator wired the halted VMs: annotation %s: Sibling and the domain hook sidecar, no autoattachVSOCK; starting them is what `virtctl start` does; the agent runs their group's vhost-device-vsock once a launcher pod is bound to this node)\n", fastpathv1alpha1.VSOCKModeAnnotation)
	for _, vm := range SiblingVMs {
		if _, err := d.kubectl(ctx, nil, "-n", Namespace, "patch", "vm", vm, "--type", "merge", "-p", `{"spec":{"runStrategy":"Always"}}`); err != nil {
			return err
		}
	}
	if err := d.waitAttachments(ctx); err != nil {
		return err
	}
	if err := d.waitFor(ctx, 2*time.Minute, "the agent to run the Sibling group's vhost-device-vsock for the started VMs", func() (bool, error) {
		if err := d.stack.CheckProcesses(); err != nil {
			return false, err
		}
		fpn := &fastpathv1alpha1.FastPathNode{}
		if err := d.stack.Client.Get(ctx, types.NamespacedName{Name: d.stack.NodeName}, fpn); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		i := slices.IndexFunc(fpn.Status.SiblingBackends, func(b fastpathv1alpha1.SiblingBackendStatus) bool {
			return b.Attachment == Namespace+"/"+SiblingAttachment
		})
		if i < 0 || !fpn.Status.SiblingBackends[i].Running || len(fpn.Status.SiblingBackends[i].VMs) < len(SiblingVMs) {
			return false, nil
		}
		group = fpn.Status.SiblingBackends[i]
		return true, nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "FastPathNode %s: siblingBackends %s running (pid %d), VMs %s; sockets in %s\n",
		d.stack.NodeName, group.Attachment, group.PID, strings.Join(group.VMs, ", "), d.rel(d.stack.SiblingSocketDir))
	return d.waitFor(ctx, 5*time.Minute, "the Sibling VMs' real guests to boot", func() (bool, error) {
		for _, name := range SiblingVMs {
			g, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: Namespace, Name: name})
			if !ok || g.Real == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// stopSibling halts the Sibling VMs and deletes their attachment, then
// checks that the operator took the Sibling wiring out of the templates and
// the agent stopped the group's vhost-device-vsock. Halting first means no
// running guest loses its device.
func (d *demo) stopSibling(ctx context.Context) error {
	a := &fastpathv1alpha1.FastPathAttachment{}
	if err := d.stack.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: SiblingAttachment}, a); err != nil {
		return client.IgnoreNotFound(err)
	}
	for _, vm := range SiblingVMs {
		if _, err := d.kubectl(ctx, nil, "-n", Namespace, "patch", "vm", vm, "--type", "merge", "-p", `{"spec":{"runStrategy":"Halted"}}`); err != nil {
			return err
		}
	}
	if err := d.waitFor(ctx, 2*time.Minute, "the Sibling VMs to stop", func() (bool, error) {
		for _, name := range SiblingVMs {
			if _, ok := d.stack.Emulator.Guest(types.NamespacedName{Namespace: Namespace, Name: name}); ok {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	if _, err := d.kubectl(ctx, nil, "-n", Namespace, "delete", "fpa", SiblingAttachment, "--wait=true", "--timeout=2m"); err != nil {
		return err
	}
	if err := d.waitFor(ctx, 2*time.Minute, "the Sibling wiring and vhost-device-vsock group to go", func() (bool, error) {
		for _, name := range SiblingVMs {
			vm := &kubevirtv1.VirtualMachine{}
			if err := d.stack.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: name}, vm); err != nil {
				return false, err
			}
			if _, wired := vm.Spec.Template.ObjectMeta.Annotations[fastpathv1alpha1.VSOCKModeAnnotation]; wired {
				return false, nil
			}
		}
		fpn := &fastpathv1alpha1.FastPathNode{}
		if err := d.stack.Client.Get(ctx, types.NamespacedName{Name: d.stack.NodeName}, fpn); err != nil {
			return false, err
		}
		return len(fpn.Status.SiblingBackends) == 0 && len(siblingBackendPIDs(d.stack.SiblingSocketDir)) == 0, nil
	}); err != nil {
		return err
	}
	fmt.Fprintf(d.out, "%s deleted with its VMs halted: templates without the Sibling wiring, no vhost-device-vsock left for it   [%s stopped]\n", SiblingAttachment, guests.Label)
	return nil
}

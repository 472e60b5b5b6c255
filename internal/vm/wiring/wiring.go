package wiring

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// Kubernetes and KubeVirt constants of the wiring.
const (
	// HostnameTopologyKey is the well-known node label (k8s.io/api/core/v1
	// LabelHostname) the co-location affinity uses as its topology key.
	HostnameTopologyKey = "kubernetes.io/hostname"
	// PreferredAffinityWeight is the weight of the preferred affinity term: the
	// maximum the scheduler accepts (1-100).
	PreferredAffinityWeight = int64(100)
	// InterfaceModel is the virtio-net device model of the fast-path interface.
	InterfaceModel = "virtio"
	// DefaultBinding is the KubeVirt network binding plugin name of the
	// interfaces of datapaths LinuxBridge and OVS: "fastpath", registered in
	// the KubeVirt CR under spec.configuration.network.binding with
	// domainAttachmentType managedTap and the domain hook as its sidecarImage
	// (package bindingplugin).
	DefaultBinding = "fastpath"
	// DefaultMacvtapBinding is the binding plugin name of datapath Macvtap's
	// interfaces: "fastpath-macvtap", registered with domainAttachmentType tap
	// (QEMU opens the pod's macvtap, as with KubeVirt's macvtap binding) and
	// the same sidecarImage.
	DefaultMacvtapBinding = "fastpath-macvtap"
	// SiblingResourceQuantity is the limit of v1alpha1.SiblingResourceName
	// on a VM in vsock mode Sibling: one device (one socket directory) for
	// the compute container. The API server keeps a quantity "1" as "1", so
	// Unwire finds what Wire wrote.
	SiblingResourceQuantity = "1"
)

// Item names an entry the operator adds to a VM template.
type Item string

// Items of a wiring, as recorded in Record.Added.
const (
	ItemInterface         Item = "interface"
	ItemNetwork           Item = "network"
	ItemLabel             Item = "label"
	ItemTuning            Item = "tuning"
	ItemVSOCKMode         Item = "vsockMode"
	ItemSiblingNode       Item = "siblingNodeSelector"
	ItemSiblingResource   Item = "siblingResource"
	ItemRequiredAffinity  Item = "requiredPodAffinity"
	ItemPreferredAffinity Item = "preferredPodAffinity"
)

// Paths below spec.template of the fields the wiring touches.
var (
	pathInterfaces  = []string{"spec", "domain", "devices", "interfaces"}
	pathNetworks    = []string{"spec", "networks"}
	pathMultiqueue  = []string{"spec", "domain", "devices", "networkInterfaceMultiqueue"}
	pathVSOCK       = []string{"spec", "domain", "devices", "autoattachVSOCK"}
	pathLabels      = []string{"metadata", "labels"}
	pathAnnotations = []string{"metadata", "annotations"}
	pathNodeSel     = []string{"spec", "nodeSelector"}
	pathLimits      = []string{"spec", "domain", "resources", "limits"}
	pathEviction    = []string{"spec", "evictionStrategy"}
	pathRequired    = []string{"spec", "affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution"}
	pathPreferred   = []string{"spec", "affinity", "podAffinity", "preferredDuringSchedulingIgnoredDuringExecution"}
)

// Desired is the wiring one attachment wants on every VM it wires.
type Desired struct {
	// Attachment is the FastPathAttachment name; the network and interface are
	// named v1alpha1.NetworkName(Attachment).
	Attachment string
	// AttachmentUID is the attachment's metadata.uid, kept in the Record; ""
	// (tests, tools) matches any.
	AttachmentUID string
	// Network is the fast virtio-net path; nil when the attachment has no spec.network.
	Network *Network
	// VSOCK sets autoattachVSOCK: true (the attachment declares vsock services
	// in mode Relay, which uses KubeVirt's kernel vsock device).
	VSOCK bool
	// SiblingVSOCK sets the template annotation v1alpha1.VSOCKModeAnnotation to
	// "Sibling" (the attachment declares vsock services in mode Sibling): the
	// domain hook gives the domain a vhost-user-vsock device instead, so neither
	// autoattachVSOCK nor a KubeVirt CID is needed. It also puts
	// v1alpha1.VhostUserVSOCKNodeLabel: "true" into spec.nodeSelector, so the
	// VM is scheduled only where a node agent runs the vhost-user backend,
	// and v1alpha1.SiblingResourceName: "1" into
	// spec.domain.resources.limits: KubeVirt copies the VMI's
	// domain.resources limits to the compute container (KubeVirt v1.6
	// pkg/virt-controller/services/renderresources.go NewResourceRenderer and
	// Limits, used for the compute container in template.go), so kubelet
	// asks the agent's device plugin for one device, which brings the VM's
	// vhost-user socket into the container.
	SiblingVSOCK bool
	// Placement selects the pod affinity term: Required, Preferred or None ("" is None).
	Placement v1alpha1.Placement
	// SuspendPlacement leaves the pod affinity term out while a group move
	// runs (v1alpha1.MoveStatus): a required term would make every migration
	// target unschedulable (the peers it asks for are all on the node being
	// left). KubeVirt applies affinity changes to the running VMI live
	// (rollout strategy LiveUpdate); the migrations then name the target
	// node in addedNodeSelector, and the term comes back when all arrived.
	SuspendPlacement bool
	// EvictionStrategy sets spec.evictionStrategy (KubeVirt's
	// EvictionStrategyExternal, "External", for eviction MigrateTogether: an
	// eviction marks the VMI and is denied, and the operator moves the group);
	// "" leaves the field alone. A value the user had is recorded and comes
	// back on Unwire. KubeVirt does not apply it to a running VMI live: it
	// takes effect at the VM's next start, as the interface does.
	EvictionStrategy string
}

// EvictionStrategyExternal is KubeVirt's evictionStrategy value with which
// virt-api denies a launcher pod's eviction and sets the VMI's
// status.evacuationNodeName, leaving the migration to another controller
// (kubevirt.io/api core/v1 EvictionStrategyExternal).
const EvictionStrategyExternal = "External"

// Network is the network part of a Desired wiring.
type Network struct {
	// NetworkAttachmentDefinition is the Multus network name: the NAD's name
	// (it lives in the VM's namespace).
	NetworkAttachmentDefinition string
	// Binding is the KubeVirt network binding plugin of the interface
	// ("binding": {"name": Binding}): DefaultBinding, or DefaultMacvtapBinding
	// for datapath Macvtap, each registered in the KubeVirt CR
	// (docs/install.md#the-binding-plugin). KubeVirt runs the plugin's
	// sidecar, the domain hook, in the VM's virt-launcher pod. "" gives
	// KubeVirt's built-in "bridge": {} binding and no domain hook (tests and
	// tools only).
	Binding string
	// Tuning goes into the fastpath.io/tuning annotation; Queues > 1 also sets
	// networkInterfaceMultiqueue: true.
	Tuning domaintuning.Interface
}

// ForAttachment returns the wiring of an attachment, with the API defaults
// applied (v1alpha1.DefaultAttachmentSpec). The NAD has the attachment's
// name; the interface gets the binding DefaultBinding, or
// DefaultMacvtapBinding on datapath Macvtap.
func ForAttachment(att *v1alpha1.FastPathAttachment) Desired {
	spec := v1alpha1.DefaultAttachmentSpec(att.Spec)
	d := Desired{Attachment: att.Name, AttachmentUID: string(att.UID), Placement: spec.Placement}
	if spec.Eviction == v1alpha1.EvictionMigrateTogether {
		d.EvictionStrategy = EvictionStrategyExternal
	}
	if spec.Network != nil {
		d.Network = &Network{NetworkAttachmentDefinition: att.Name, Binding: DefaultBinding, Tuning: domaintuning.FromNetworkSpec(*spec.Network)}
		if spec.Network.Datapath == v1alpha1.DatapathMacvtap {
			d.Network.Binding = DefaultMacvtapBinding
		}
	}
	if spec.VSOCK != nil && len(spec.VSOCK.Services) > 0 {
		if spec.VSOCK.Mode == v1alpha1.VSOCKModeSibling {
			d.SiblingVSOCK = true
		} else {
			d.VSOCK = true
		}
	}
	return d
}

// ConflictError says why a VM cannot be wired; Wire changed nothing.
type ConflictError struct {
	// HeldBy is the attachment whose Record is on the VM, when that is the conflict.
	HeldBy string
	// Field is the user's field in the way (a path below spec.template), otherwise.
	Field string
	// Reason says what is wrong with Field; "" means it exists and was not
	// written by fastpath-operator.
	Reason string
}

func (e *ConflictError) Error() string {
	switch {
	case e.HeldBy != "":
		return fmt.Sprintf("the VM is wired by FastPathAttachment %s", e.HeldBy)
	case e.Reason != "":
		return fmt.Sprintf("spec.template.%s %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("spec.template.%s exists and was not written by fastpath-operator", e.Field)
}

// Wire makes the VM carry d, in place, and reports whether anything changed.
// It is idempotent and also converges an earlier wiring of the same attachment
// to d (e.g. placement Required → Preferred, queues 4 → 1, network removed).
//
// Errors: *ConflictError when the VM is wired by another attachment (or by an
// earlier attachment of the same name: Stale; unwire it first), a user
// entry is in the way or the user's HookSidecarsAnnotation is not a JSON list
// of hook sidecars (the VM is unchanged); an error when the template is not
// the shape KubeVirt defines (e.g. spec.template missing, networks not a list)
// or the Record is malformed.
func Wire(vm map[string]any, d Desired) (bool, error) {
	if d.Attachment == "" {
		return false, fmt.Errorf("failed to wire VM: the attachment name is empty")
	}
	rec, err := ReadRecord(vm)
	if err != nil {
		return false, err
	}
	if rec != nil && rec.Attachment != d.Attachment {
		return false, &ConflictError{HeldBy: rec.Attachment}
	}
	if Stale(vm, d.Attachment, d.AttachmentUID) {
		return false, &ConflictError{HeldBy: fmt.Sprintf("%s (uid %s, an earlier attachment of that name)", rec.Attachment, rec.AttachmentUID)}
	}
	if rec == nil {
		rec = &Record{Attachment: d.Attachment}
	}
	if d.AttachmentUID != "" {
		rec.AttachmentUID = d.AttachmentUID
	}
	tpl, err := template(vm)
	if err != nil {
		return false, err
	}
	want, err := wanted(d)
	if err != nil {
		return false, err
	}
	if err := checkConflicts(tpl, rec, want); err != nil {
		return false, err
	}
	before, err := json.Marshal(vm)
	if err != nil {
		return false, fmt.Errorf("failed to encode VM: %w", err)
	}
	w := &editor{tpl: tpl, rec: rec}
	if err := w.converge(want); err != nil {
		return false, err
	}
	if err := writeRecord(vm, rec); err != nil {
		return false, err
	}
	after, err := json.Marshal(vm)
	if err != nil {
		return false, fmt.Errorf("failed to encode VM: %w", err)
	}
	return !bytes.Equal(before, after), nil
}

// Unwire removes the wiring its Record describes from the VM, in place, restores
// every scalar the operator set, deletes every container it created that is
// empty again and removes the Record. The hook sidecar annotation gets back its
// recorded value, byte for byte, while it still holds what the operator wrote;
// after a user change only the operator's entry is cut out. It reports whether
// anything changed; a VM without a Record is left alone. Errors as for Wire,
// never a ConflictError: a hook sidecar annotation the user made unreadable
// since is an error naming it, and the VM is unchanged.
func Unwire(vm map[string]any) (bool, error) {
	rec, err := ReadRecord(vm)
	if err != nil || rec == nil {
		return false, err
	}
	tpl, err := template(vm)
	if err != nil {
		return false, err
	}
	if err := checkHookSidecars(tpl, rec); err != nil {
		// %v, not %w: Unwire promises no *ConflictError (there is no other
		// attachment to hand the VM to; the user has to fix the value).
		return false, fmt.Errorf("failed to unwire VM: %v", err)
	}
	want, err := wanted(Desired{Attachment: rec.Attachment})
	if err != nil {
		return false, err
	}
	for i := range want.entries {
		want.entries[i].value = nil
	}
	want.scalars = nil
	w := &editor{tpl: tpl, rec: rec}
	if err := w.converge(want); err != nil {
		return false, err
	}
	removeRecord(vm)
	return true, nil
}

// IsWired reports whether the VM already carries exactly d (Wire would change
// nothing). vm holds JSON values as the unstructured decoder makes them
// (string, int64, float64, bool, nil, maps and lists of those):
// runtime.DeepCopyJSON copies it and panics on any other type.
func IsWired(vm map[string]any, d Desired) bool {
	changed, err := Wire(runtime.DeepCopyJSON(vm), d)
	return err == nil && !changed
}

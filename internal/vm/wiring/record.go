package wiring

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// RecordAnnotation is the VM metadata annotation holding the Record of what the
// operator changed in the VM's template (JSON): v1alpha1.WiringRecordAnnotation.
const RecordAnnotation = v1alpha1.WiringRecordAnnotation

// Record is what Wire changed in a VM template, kept in RecordAnnotation so
// Unwire can undo exactly that. Paths are dotted and relative to spec.template.
type Record struct {
	// Attachment is the FastPathAttachment that wired the VM.
	Attachment string `json:"attachment"`
	// AttachmentUID is that attachment's metadata.uid: a record of an earlier
	// attachment of the same name (deleted, then created again) is not the new
	// one's. Records written before it existed have none and match by name.
	AttachmentUID string `json:"attachmentUID,omitempty"`
	// Added are the entries the operator added (and will remove).
	Added []Item `json:"added,omitempty"`
	// Scalars are the scalar fields the operator set, with their previous values.
	Scalars []Scalar `json:"scalars,omitempty"`
	// Created are the maps and lists that did not exist before the operator
	// needed them; Unwire deletes each one that is empty again.
	Created []string `json:"created,omitempty"`
	// HookSidecar is the operator's entry in the template annotation
	// HookSidecarsAnnotation, when it added one.
	HookSidecar *HookSidecarRecord `json:"hookSidecar,omitempty"`
}

// Scalar is one scalar field set by the operator.
type Scalar struct {
	// Field is the dotted path below spec.template, e.g. spec.domain.devices.autoattachVSOCK.
	Field string `json:"field"`
	// Previous is the JSON value before the operator set it; absent when the
	// field was absent.
	Previous json.RawMessage `json:"previous,omitempty"`
}

// ReadRecord returns the Record on a VM, or nil when the VM carries none. A
// malformed record is an error.
func ReadRecord(vm map[string]any) (*Record, error) {
	raw, found, err := unstructured.NestedString(vm, "metadata", "annotations", RecordAnnotation)
	if err != nil || !found {
		return nil, nil // no annotations map, or a value that is not a string: no record
	}
	rec := &Record{}
	if err := json.Unmarshal([]byte(raw), rec); err != nil {
		return nil, fmt.Errorf("failed to parse annotation %s: %w", RecordAnnotation, err)
	}
	if rec.Attachment == "" {
		return nil, fmt.Errorf("failed to parse annotation %s: attachment is empty", RecordAnnotation)
	}
	return rec, nil
}

// Owner returns the attachment whose Record is on the VM, or "" when there is
// none or it is malformed.
func Owner(vm map[string]any) string {
	rec, err := ReadRecord(vm)
	if err != nil || rec == nil {
		return ""
	}
	return rec.Attachment
}

// OwnerUID returns the metadata.uid of the attachment whose Record is on the
// VM, or "" when there is none, it is malformed or it predates AttachmentUID.
func OwnerUID(vm map[string]any) string {
	rec, err := ReadRecord(vm)
	if err != nil || rec == nil {
		return ""
	}
	return rec.AttachmentUID
}

// Stale reports whether the VM carries the Record of an earlier attachment
// of this name (same name, another uid): what a new attachment created under
// the name of a deleted one finds on VMs the deleted one could not unwire, or
// in a cache that has not yet seen the unwiring.
func Stale(vm map[string]any, attachment, uid string) bool {
	rec, err := ReadRecord(vm)
	if err != nil || rec == nil {
		return false
	}
	return rec.Attachment == attachment && rec.AttachmentUID != "" && uid != "" && rec.AttachmentUID != uid
}

// OwnerFromAnnotations is Owner for a VM's metadata.annotations.
func OwnerFromAnnotations(annotations map[string]string) string {
	rec, err := RecordFromAnnotations(annotations)
	if err != nil || rec == nil {
		return ""
	}
	return rec.Attachment
}

// RecordFromAnnotations is ReadRecord for a VM's metadata.annotations (what
// a metadata-only read returns): nil when there is no record, an error
// naming the annotation when it is malformed.
func RecordFromAnnotations(annotations map[string]string) (*Record, error) {
	raw, ok := annotations[RecordAnnotation]
	if !ok {
		return nil, nil
	}
	return ReadRecord(map[string]any{"metadata": map[string]any{"annotations": map[string]any{RecordAnnotation: raw}}})
}

func writeRecord(vm map[string]any, rec *Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("failed to encode annotation %s: %w", RecordAnnotation, err)
	}
	meta, ok := vm["metadata"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		vm["metadata"] = meta
	}
	ann, ok := meta["annotations"].(map[string]any)
	if !ok {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[RecordAnnotation] = string(data)
	return nil
}

func removeRecord(vm map[string]any) {
	meta, _ := vm["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		return
	}
	delete(ann, RecordAnnotation)
	if len(ann) == 0 {
		// The API server drops an empty metadata.annotations map anyway.
		delete(meta, "annotations")
	}
}

// SetsEvictionStrategy reports whether the Record on the VM says the
// operator set spec.template.spec.evictionStrategy (Desired.EvictionStrategy).
func SetsEvictionStrategy(vm map[string]any) bool {
	rec, err := ReadRecord(vm)
	if err != nil || rec == nil {
		return false
	}
	f := strings.Join(pathEviction, ".")
	return slices.ContainsFunc(rec.Scalars, func(s Scalar) bool { return s.Field == f })
}

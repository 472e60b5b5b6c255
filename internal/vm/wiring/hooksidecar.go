package wiring

// This file is the legacy half of the wiring: Fastpath before the binding
// plugin (docs/kubevirt.md) ran the domain hook through KubeVirt's
// hooks.kubevirt.io/hookSidecars annotation, which needs the cluster-wide
// Sidecar feature gate that KubeVirt deprecated in v1.9. Wire no longer
// adds an entry; it and Unwire remove the entry an earlier Fastpath recorded,
// restoring the annotation byte for byte, so VMs wired the old way migrate
// on upgrade.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// HookSidecarsAnnotation is KubeVirt's VMI annotation listing the hook
// sidecars virt-controller adds to the virt-launcher pod, one container
// (hook-sidecar-<i>) per entry. Its value is a JSON list inside a string, each
// entry a KubeVirt hooks.HookSidecar object, e.g.
//
//	[{"args": ["--version", "v1alpha3"], "image": "registry.example.com/fastpath-domain-hook:v0.1.0"}]
//
// Source: kubevirt/kubevirt v1.6.0 pkg/hooks/hooks.go
// (HookSidecarListAnnotationName, HookSidecar, UnmarshalHookSidecarList) and
// pkg/virt-controller/services/template.go (newSidecarContainerRenderer: the
// entry's args become the container's args, its image the container's image).
// virt-api rejects a VM whose template carries it unless the KubeVirt feature
// gate Sidecar is on (pkg/virt-api/webhooks/validating-webhook/admitters/
// vmi-create-admitter.go, ValidateVirtualMachineInstanceMetadata).
const HookSidecarsAnnotation = "hooks.kubevirt.io/hookSidecars"

// HookSidecar is one entry of HookSidecarsAnnotation as an earlier Fastpath
// wrote it: the fields of KubeVirt's hooks.HookSidecar it used.
type HookSidecar struct {
	// Args are the sidecar container's args: "--version", "v1alpha3".
	Args []string `json:"args,omitempty"`
	// Image is the domain hook image (Dockerfile target domain-hook).
	Image string `json:"image"`
}

// HookSidecarRecord is the operator's entry in HookSidecarsAnnotation, kept in
// the Record so Unwire can restore the annotation exactly.
type HookSidecarRecord struct {
	// Entry is the entry the operator appended (a JSON object as written).
	Entry json.RawMessage `json:"entry"`
	// Previous is the annotation's value before the entry was appended; absent
	// when the template had no such annotation.
	Previous *string `json:"previous,omitempty"`
	// Written is the annotation's value right after. While the annotation
	// still equals it, Unwire restores Previous (or removes the annotation);
	// once the user changed it, Unwire removes only the operator's entry.
	Written string `json:"written"`
}

// hookSidecarsField is the annotation's path below spec.template, as reported
// in errors.
var hookSidecarsField = fmt.Sprintf("%s[%q]", strings.Join(pathAnnotations, "."), HookSidecarsAnnotation)

// kubevirtHookSidecar mirrors kubevirt v1.6.0 hooks.HookSidecar, so an entry
// KubeVirt cannot decode is malformed here too.
type kubevirtHookSidecar struct {
	Image           string   `json:"image,omitempty"`
	ImagePullPolicy string   `json:"imagePullPolicy"`
	Command         []string `json:"command,omitempty"`
	Args            []string `json:"args,omitempty"`
	ConfigMap       *struct {
		Name     string `json:"name"`
		Key      string `json:"key"`
		HookPath string `json:"hookPath"`
	} `json:"configMap,omitempty"`
	PVC *struct {
		Name              string `json:"name"`
		VolumePath        string `json:"volumePath"`
		SharedComputePath string `json:"sharedComputePath"`
	} `json:"pvc,omitempty"`
}

// hookList is a parsed HookSidecarsAnnotation value. It keeps the byte spans
// of the entries so one entry can be appended or cut out without encoding the
// others again: every other byte of the user's string stays as it was.
type hookList struct {
	value string
	// open is the offset just after '['.
	open int
	// spans are the [start, end) offsets of the entries, images their images.
	spans  [][2]int
	images []string
}

// parseHookList parses an annotation value that must be a JSON list of
// KubeVirt hook sidecar objects and nothing else (JSON null, which KubeVirt
// would read as an empty list, is refused too: there is nothing to append to
// without rewriting it).
func parseHookList(value string) (*hookList, error) {
	dec := json.NewDecoder(strings.NewReader(value))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("failed to parse a JSON list: %w", err)
	}
	if tok != json.Delim('[') {
		if tok == nil {
			tok = "null"
		}
		return nil, fmt.Errorf("failed to parse a JSON list: the value starts with %v", tok)
	}
	l := &hookList{value: value, open: int(dec.InputOffset())}
	for i := 0; dec.More(); i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("failed to parse entry %d: %w", i, err)
		}
		var hs kubevirtHookSidecar
		if err := json.Unmarshal(raw, &hs); err != nil {
			return nil, fmt.Errorf("failed to parse entry %d as a KubeVirt hook sidecar: %w", i, err)
		}
		end := int(dec.InputOffset())
		l.spans = append(l.spans, [2]int{end - len(raw), end})
		l.images = append(l.images, hs.Image)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("failed to parse the end of the JSON list: %w", err)
	}
	if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("failed to parse a JSON list: unexpected %v%v after its end", tok, err)
	}
	return l, nil
}

// index returns the index of the last entry running image, or -1.
func (l *hookList) index(image string) int {
	for i := len(l.images) - 1; i >= 0; i-- {
		if l.images[i] == image {
			return i
		}
	}
	return -1
}

// without returns the value with entry i and one separating comma cut out.
func (l *hookList) without(i int) string {
	s := l.spans
	switch {
	case len(s) == 1:
		return l.value[:s[0][0]] + l.value[s[0][1]:]
	case i == 0:
		return l.value[:s[0][0]] + l.value[s[1][0]:]
	default:
		return l.value[:s[i-1][1]] + l.value[s[i][1]:]
	}
}

// entryImage returns the image of a recorded entry.
func entryImage(entry json.RawMessage) (string, error) {
	var hs HookSidecar
	if err := json.Unmarshal(entry, &hs); err != nil {
		return "", fmt.Errorf("failed to parse the hook sidecar entry in annotation %s: %w", RecordAnnotation, err)
	}
	return hs.Image, nil
}

// hookAnnotation returns the template's HookSidecarsAnnotation value.
func hookAnnotation(tpl map[string]any) (value string, present bool, err error) {
	v, found, err := nested(tpl, pathAnnotations)
	if err != nil || !found {
		return "", false, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", false, shapeError(pathAnnotations, "a map")
	}
	raw, present := m[HookSidecarsAnnotation]
	if !present {
		return "", false, nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", true, &ConflictError{Field: hookSidecarsField, Reason: "is not a string"}
	}
	return s, true, nil
}

// checkHookSidecars fails with a *ConflictError when removing a recorded
// legacy entry would have to read an annotation value that is not a JSON list
// of hook sidecars: the value is the user's, and is never rewritten.
func checkHookSidecars(tpl map[string]any, rec *Record) error {
	if rec.HookSidecar == nil {
		return nil
	}
	value, present, err := hookAnnotation(tpl)
	if err != nil || !present {
		return err
	}
	if rec.HookSidecar != nil && value == rec.HookSidecar.Written {
		return nil
	}
	if _, err := parseHookList(value); err != nil {
		return &ConflictError{Field: hookSidecarsField, Reason: fmt.Sprintf(
			"is not a JSON list of KubeVirt hook sidecars (%v); fastpath-operator leaves it unchanged and cannot remove the domain hook entry an earlier Fastpath added", err)}
	}
	return nil
}

// removeLegacyHookSidecar removes the entry an earlier Fastpath appended
// to HookSidecarsAnnotation, as its Record says (nothing without one), and
// drops it from the Record. checkHookSidecars has passed.
func (w *editor) removeLegacyHookSidecar() error {
	rec := w.rec.HookSidecar
	if rec == nil {
		return nil
	}
	if err := w.removeHookSidecar(rec); err != nil {
		return err
	}
	w.rec.HookSidecar = nil
	return nil
}

// removeHookSidecar undoes rec: the annotation as it was when it still holds
// what the operator wrote, otherwise the same value without the operator's
// entry (nothing when the user removed the entry or the annotation).
func (w *editor) removeHookSidecar(rec *HookSidecarRecord) error {
	value, present, err := hookAnnotation(w.tpl)
	if err != nil || !present {
		return err
	}
	v, _, err := nested(w.tpl, pathAnnotations)
	if err != nil {
		return err
	}
	ann := v.(map[string]any)
	if value == rec.Written {
		if rec.Previous == nil {
			delete(ann, HookSidecarsAnnotation)
		} else {
			ann[HookSidecarsAnnotation] = *rec.Previous
		}
		return nil
	}
	image, err := entryImage(rec.Entry)
	if err != nil {
		return err
	}
	l, err := parseHookList(value)
	if err != nil {
		return &ConflictError{Field: hookSidecarsField, Reason: fmt.Sprintf("is not a JSON list of KubeVirt hook sidecars (%v)", err)}
	}
	if i := l.index(image); i >= 0 {
		ann[HookSidecarsAnnotation] = l.without(i)
	}
	return nil
}

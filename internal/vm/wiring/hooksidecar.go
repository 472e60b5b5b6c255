package wiring

import (
	"bytes"
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

// HookShimVersion is the hook API version the sidecar-shim is told to serve
// (--version). kubevirt/kubevirt v1.6.0 cmd/sidecars/sidecar_shim.go
// (parseCommandLineArgs) accepts v1alpha1, v1alpha2 and v1alpha3 and fails
// without one; v1alpha3 is the newest and the one the Dockerfile's domain-hook
// target sets as its entrypoint.
const HookShimVersion = "v1alpha3"

// HookSidecar is one entry of HookSidecarsAnnotation as the operator writes
// it: the fields of KubeVirt's hooks.HookSidecar it uses.
type HookSidecar struct {
	// Args are the sidecar container's args: "--version" HookShimVersion.
	// They repeat the domain-hook image's entrypoint flags, so the entry also
	// works with an image whose entrypoint is the bare /sidecar-shim (KubeVirt's
	// own sidecar-shim image); the shim's flag parser takes the last value.
	Args []string `json:"args,omitempty"`
	// Image is the domain hook image (Dockerfile target domain-hook).
	Image string `json:"image"`
}

// DomainHookSidecar returns the entry that runs the domain hook image.
func DomainHookSidecar(image string) HookSidecar {
	return HookSidecar{Args: []string{"--version", HookShimVersion}, Image: image}
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

// appended returns the value with entry appended after the last entry.
func (l *hookList) appended(entry []byte) string {
	if len(l.spans) == 0 {
		return l.value[:l.open] + string(entry) + l.value[l.open:]
	}
	at := l.spans[len(l.spans)-1][1]
	return l.value[:at] + "," + string(entry) + l.value[at:]
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

// HookSidecarImages returns the images of the entries of a
// HookSidecarsAnnotation value, in order; an entry without an image (KubeVirt
// then runs its own sidecar-shim image) gives "". A value that is not a JSON
// list of hook sidecar objects is an error.
func HookSidecarImages(value string) ([]string, error) {
	l, err := parseHookList(value)
	if err != nil {
		return nil, fmt.Errorf("failed to parse annotation %s: %w", HookSidecarsAnnotation, err)
	}
	return l.images, nil
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

// checkHookSidecars fails with a *ConflictError when the hook sidecar part of
// the wiring would have to read an annotation value that is not a JSON list of
// hook sidecars: the value is the user's, and is never rewritten. hook is the
// wanted entry (nil: none).
func checkHookSidecars(tpl map[string]any, rec *Record, hook []byte) error {
	if hook == nil && rec.HookSidecar == nil {
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
			"is not a JSON list of KubeVirt hook sidecars (%v); fastpath-operator leaves it unchanged and cannot add or remove its domain hook entry", err)}
	}
	return nil
}

// hookSidecar converges the operator's entry in HookSidecarsAnnotation to
// hook (nil: no entry). checkHookSidecars has passed.
func (w *editor) hookSidecar(hook []byte) error {
	if rec := w.rec.HookSidecar; rec != nil && (hook == nil || !bytes.Equal(rec.Entry, hook)) {
		if err := w.removeHookSidecar(rec); err != nil {
			return err
		}
		w.rec.HookSidecar = nil
	}
	if hook == nil {
		return nil
	}
	image, err := entryImage(hook)
	if err != nil {
		return err
	}
	value, present, err := hookAnnotation(w.tpl)
	if err != nil {
		return err
	}
	next := "[" + string(hook) + "]"
	if present {
		l, err := parseHookList(value)
		if err != nil {
			return &ConflictError{Field: hookSidecarsField, Reason: fmt.Sprintf("is not a JSON list of KubeVirt hook sidecars (%v)", err)}
		}
		if l.index(image) >= 0 {
			// Our recorded entry, or the user's own entry running the hook
			// image: that does the job and stays theirs.
			return nil
		}
		next = l.appended(hook)
	}
	rec := &HookSidecarRecord{Entry: json.RawMessage(hook), Written: next}
	if present {
		rec.Previous = &value
	}
	ann, err := w.ensureMap(pathAnnotations)
	if err != nil {
		return err
	}
	ann[HookSidecarsAnnotation] = next
	w.rec.HookSidecar = rec
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

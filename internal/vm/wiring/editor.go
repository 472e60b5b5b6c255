package wiring

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// entry is one list or map entry of a wiring. value nil means "not wanted".
type entry struct {
	item Item
	// list entries: the list path and a match function; map entries: the map
	// path and the key.
	path  []string
	key   string
	match func(any) bool
	// byName: a list entry identified by its "name"; an unowned entry of that
	// name is a conflict. Otherwise an equal unowned entry satisfies the want.
	byName bool
	value  any
}

type wants struct {
	entries []entry
	// scalars maps dotted paths to the wanted value (a bool or a string).
	scalars map[string]any
}

func wanted(d Desired) (wants, error) {
	name := v1alpha1.NetworkName(d.Attachment)
	byName := func(e any) bool {
		m, ok := e.(map[string]any)
		return ok && m["name"] == name
	}
	term := map[string]any{
		"labelSelector": map[string]any{"matchLabels": map[string]any{v1alpha1.AttachmentLabel: d.Attachment}},
		"topologyKey":   HostnameTopologyKey,
	}
	preferred := map[string]any{"weight": PreferredAffinityWeight, "podAffinityTerm": term}
	equalTo := func(v any) func(any) bool {
		return func(e any) bool { return jsonEqual(e, v) }
	}
	w := wants{scalars: map[string]any{}}
	iface := entry{item: ItemInterface, path: pathInterfaces, match: byName, byName: true}
	network := entry{item: ItemNetwork, path: pathNetworks, match: byName, byName: true}
	tuningAnn := entry{item: ItemTuning, path: pathAnnotations, key: v1alpha1.TuningAnnotation}
	if d.Network != nil {
		iface.value = map[string]any{"name": name, "bridge": map[string]any{}, "model": InterfaceModel}
		if b := d.Network.Binding; b != "" {
			iface.value = map[string]any{"name": name, "binding": map[string]any{"name": b}, "model": InterfaceModel}
		}
		network.value = map[string]any{"name": name, "multus": map[string]any{"networkName": d.Network.NetworkAttachmentDefinition}}
		value, err := domaintuning.Annotation{Interfaces: map[string]domaintuning.Interface{name: d.Network.Tuning}}.Marshal()
		if err != nil {
			return wants{}, err
		}
		tuningAnn.value = value
		if d.Network.Tuning.Queues > 1 {
			w.scalars[strings.Join(pathMultiqueue, ".")] = true
		}
	}
	if d.VSOCK {
		w.scalars[strings.Join(pathVSOCK, ".")] = true
	}
	modeAnn := entry{item: ItemVSOCKMode, path: pathAnnotations, key: v1alpha1.VSOCKModeAnnotation}
	siblingNode := entry{item: ItemSiblingNode, path: pathNodeSel, key: v1alpha1.VhostUserVSOCKNodeLabel}
	siblingRes := entry{item: ItemSiblingResource, path: pathLimits, key: v1alpha1.SiblingResourceName}
	if d.SiblingVSOCK {
		modeAnn.value = string(v1alpha1.VSOCKModeSibling)
		siblingNode.value = "true"
		siblingRes.value = SiblingResourceQuantity
	}
	label := entry{item: ItemLabel, path: pathLabels, key: v1alpha1.AttachmentLabel, value: d.Attachment}
	req := entry{item: ItemRequiredAffinity, path: pathRequired, match: equalTo(term)}
	pref := entry{item: ItemPreferredAffinity, path: pathPreferred, match: equalTo(preferred)}
	if d.EvictionStrategy != "" {
		w.scalars[strings.Join(pathEviction, ".")] = d.EvictionStrategy
	}
	switch {
	case d.SuspendPlacement:
	case d.Placement == v1alpha1.PlacementRequired:
		req.value = term
	case d.Placement == v1alpha1.PlacementPreferred:
		pref.value = preferred
	}
	w.entries = []entry{network, iface, label, tuningAnn, modeAnn, siblingNode, siblingRes, req, pref}
	return w, nil
}

// checkConflicts fails when a wanted entry would overwrite something that is
// not recorded as ours.
func checkConflicts(tpl map[string]any, rec *Record, w wants) error {
	if err := checkHookSidecars(tpl, rec); err != nil {
		return err
	}
	for _, e := range w.entries {
		if e.value == nil || slices.Contains(rec.Added, e.item) {
			continue
		}
		v, found, err := nested(tpl, e.path)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		if e.key != "" {
			m, ok := v.(map[string]any)
			if !ok {
				return shapeError(e.path, "a map")
			}
			// The user's own equal label, node selector or limit does the job.
			if cur, ok := m[e.key]; ok && !((e.item == ItemLabel || e.item == ItemSiblingNode || e.item == ItemSiblingResource) && cur == e.value) {
				return &ConflictError{Field: fmt.Sprintf("%s[%q]", strings.Join(e.path, "."), e.key)}
			}
			continue
		}
		l, ok := v.([]any)
		if !ok {
			return shapeError(e.path, "a list")
		}
		if e.byName && slices.IndexFunc(l, e.match) >= 0 {
			return &ConflictError{Field: fmt.Sprintf("%s[name=%s]", strings.Join(e.path, "."), e.value.(map[string]any)["name"])}
		}
	}
	return nil
}

// editor applies wants to one template and keeps the Record up to date.
type editor struct {
	tpl map[string]any
	rec *Record
}

func (w *editor) converge(want wants) error {
	for _, e := range want.entries {
		var err error
		if e.key != "" {
			err = w.mapEntry(e)
		} else {
			err = w.listEntry(e)
		}
		if err != nil {
			return err
		}
	}
	if err := w.removeLegacyHookSidecar(); err != nil {
		return err
	}
	if err := w.scalars(want.scalars); err != nil {
		return err
	}
	return w.prune()
}

func (w *editor) owns(i Item) bool { return slices.Contains(w.rec.Added, i) }

func (w *editor) own(i Item) {
	if !w.owns(i) {
		w.rec.Added = append(w.rec.Added, i)
	}
}

func (w *editor) disown(i Item) {
	w.rec.Added = slices.DeleteFunc(w.rec.Added, func(x Item) bool { return x == i })
}

func (w *editor) listEntry(e entry) error {
	owned := w.owns(e.item)
	if e.value == nil {
		if !owned {
			return nil
		}
		w.disown(e.item)
		parent, key, found, err := w.parentOf(e.path)
		if err != nil || !found {
			return err
		}
		l, ok := parent[key].([]any)
		if !ok {
			return shapeError(e.path, "a list")
		}
		if i := slices.IndexFunc(l, e.match); i >= 0 {
			parent[key] = slices.Delete(slices.Clone(l), i, i+1)
		}
		return nil
	}
	if !owned && !e.byName {
		// An equal entry the user already has does the job; it stays theirs.
		if v, found, err := nested(w.tpl, e.path); err != nil {
			return err
		} else if l, ok := v.([]any); found && ok && slices.IndexFunc(l, e.match) >= 0 {
			return nil
		}
	}
	parent, err := w.ensureMap(e.path[:len(e.path)-1])
	if err != nil {
		return err
	}
	key := e.path[len(e.path)-1]
	cur, found := parent[key]
	if !found {
		w.created(e.path)
		cur = []any{}
	}
	l, ok := cur.([]any)
	if !ok {
		return shapeError(e.path, "a list")
	}
	w.own(e.item)
	if i := slices.IndexFunc(l, e.match); i >= 0 {
		if !jsonEqual(l[i], e.value) {
			l = slices.Clone(l)
			l[i] = e.value
			parent[key] = l
		}
		return nil
	}
	parent[key] = append(slices.Clone(l), e.value)
	return nil
}

func (w *editor) mapEntry(e entry) error {
	owned := w.owns(e.item)
	if e.value == nil {
		if !owned {
			return nil
		}
		w.disown(e.item)
		v, found, err := nested(w.tpl, e.path)
		if err != nil || !found {
			return err
		}
		m, ok := v.(map[string]any)
		if !ok {
			return shapeError(e.path, "a map")
		}
		delete(m, e.key)
		return nil
	}
	if !owned {
		if v, found, err := nested(w.tpl, e.path); err != nil {
			return err
		} else if m, ok := v.(map[string]any); found && ok && m[e.key] == e.value {
			return nil // the user's own equal value; it stays theirs
		}
	}
	m, err := w.ensureMap(e.path)
	if err != nil {
		return err
	}
	w.own(e.item)
	m[e.key] = e.value
	return nil
}

func (w *editor) scalars(want map[string]any) error {
	// Restore what is no longer wanted.
	kept := w.rec.Scalars[:0:0]
	for _, s := range w.rec.Scalars {
		if _, ok := want[s.Field]; ok {
			kept = append(kept, s)
			continue
		}
		path := strings.Split(s.Field, ".")
		if s.Previous == nil {
			parent, key, found, err := w.parentOf(path)
			if err != nil {
				return err
			}
			if found {
				delete(parent, key)
			}
			continue
		}
		var prev any
		dec := json.NewDecoder(bytes.NewReader(s.Previous))
		dec.UseNumber()
		if err := dec.Decode(&prev); err != nil {
			return fmt.Errorf("failed to parse the previous value of %s in annotation %s: %w", s.Field, RecordAnnotation, err)
		}
		parent, err := w.ensureMap(path[:len(path)-1])
		if err != nil {
			return err
		}
		parent[path[len(path)-1]] = prev
	}
	w.rec.Scalars = kept
	// Set what is wanted, recording the previous value the first time.
	fields := make([]string, 0, len(want))
	for f := range want {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		path := strings.Split(f, ".")
		if !slices.ContainsFunc(w.rec.Scalars, func(s Scalar) bool { return s.Field == f }) {
			s := Scalar{Field: f}
			v, found, err := nested(w.tpl, path)
			if err != nil {
				return err
			}
			if found {
				raw, err := json.Marshal(v)
				if err != nil {
					return fmt.Errorf("failed to encode spec.template.%s: %w", f, err)
				}
				s.Previous = raw
			}
			w.rec.Scalars = append(w.rec.Scalars, s)
		}
		parent, err := w.ensureMap(path[:len(path)-1])
		if err != nil {
			return err
		}
		parent[path[len(path)-1]] = want[f]
	}
	return nil
}

// prune deletes every created container that is empty, deepest first, and
// forgets created containers that no longer exist.
func (w *editor) prune() error {
	created := slices.Clone(w.rec.Created)
	sort.SliceStable(created, func(i, j int) bool {
		return strings.Count(created[i], ".") > strings.Count(created[j], ".")
	})
	for _, c := range created {
		path := strings.Split(c, ".")
		parent, key, found, err := w.parentOf(path)
		if err != nil {
			return err
		}
		drop := !found
		if found {
			switch v := parent[key].(type) {
			case map[string]any:
				drop = len(v) == 0
			case []any:
				drop = len(v) == 0
			}
			if drop {
				delete(parent, key)
			}
		}
		if drop {
			w.rec.Created = slices.DeleteFunc(w.rec.Created, func(x string) bool { return x == c })
		}
	}
	return nil
}

func (w *editor) created(path []string) {
	p := strings.Join(path, ".")
	if !slices.Contains(w.rec.Created, p) {
		w.rec.Created = append(w.rec.Created, p)
	}
}

// ensureMap returns the map at path below the template, creating (and
// recording) every missing map on the way.
func (w *editor) ensureMap(path []string) (map[string]any, error) {
	m := w.tpl
	for i, k := range path {
		v, ok := m[k]
		if !ok {
			n := map[string]any{}
			m[k] = n
			w.created(path[:i+1])
			m = n
			continue
		}
		n, ok := v.(map[string]any)
		if !ok {
			return nil, shapeError(path[:i+1], "a map")
		}
		m = n
	}
	return m, nil
}

// parentOf returns the map holding the last element of path and that key;
// found is false when the path does not exist.
func (w *editor) parentOf(path []string) (map[string]any, string, bool, error) {
	v, found, err := nested(w.tpl, path[:len(path)-1])
	if err != nil || !found {
		return nil, "", false, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "", false, shapeError(path[:len(path)-1], "a map")
	}
	key := path[len(path)-1]
	_, found = m[key]
	return m, key, found, nil
}

func template(vm map[string]any) (map[string]any, error) {
	spec, ok := vm["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("failed to wire VM: spec is missing or not a map")
	}
	tpl, ok := spec["template"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("failed to wire VM: spec.template is missing or not a map")
	}
	return tpl, nil
}

// nested returns the value at path below the template without copying it
// (unstructured.NestedFieldNoCopy: a JSON null on the way reads as absent). A
// value on the way that is not a map is an error naming that value's path.
func nested(tpl map[string]any, path []string) (any, bool, error) {
	v, found, err := unstructured.NestedFieldNoCopy(tpl, path...)
	if err == nil {
		return v, found, nil
	}
	// NestedFieldNoCopy names the field it could not read; name the value
	// that is not a map, as every other shape error does.
	for i := 1; i < len(path); i++ {
		if _, _, err := unstructured.NestedFieldNoCopy(tpl, path[:i+1]...); err != nil {
			return nil, false, shapeError(path[:i], "a map")
		}
	}
	return nil, false, fmt.Errorf("failed to wire VM: %w", err)
}

func shapeError(path []string, want string) error {
	return fmt.Errorf("failed to wire VM: spec.template.%s is not %s", strings.Join(path, "."), want)
}

// jsonEqual compares two JSON values by their encoding, so int and int64
// (typed constants versus decoded numbers) compare equal.
func jsonEqual(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

package wiring

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

const (
	hookImage = "registry.example.com/fastpath/fastpath-domain-hook:v0.1.0"
	// ourEntry is the entry the legacy wiring wrote for hookImage.
	ourEntry = `{"args":["--version","v1alpha3"],"image":"` + hookImage + `"}`
	// userEntry is a user's own hook sidecar, written the way people do (spaces).
	userEntry = `{"args": ["--version", "v1alpha2"], "image": "registry.example.com/smbios-hook:v1"}`
)

// legacyWire wires vm with d and then adds the domain hook entry of image to
// the template's hook sidecar annotation and the Record exactly as Fastpath
// did before the binding plugin (splicing it after the user's last entry;
// no entry when the user's own entry already runs image), so the tests can
// check that Wire and Unwire take such VMs back.
func legacyWire(t *testing.T, vm map[string]any, d Desired, image string) {
	t.Helper()
	if _, err := Wire(vm, d); err != nil {
		t.Fatalf("Wire: %v", err)
	}
	entry, err := json.Marshal(HookSidecar{Args: []string{"--version", "v1alpha3"}, Image: image})
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := template(vm)
	if err != nil {
		t.Fatal(err)
	}
	value, present := hookValue(t, vm)
	next := "[" + string(entry) + "]"
	if present {
		l, err := parseHookList(value)
		if err != nil {
			t.Fatalf("legacyWire: %v", err)
		}
		if l.index(image) >= 0 {
			return
		}
		next = appended(l, entry)
	}
	rec, err := ReadRecord(vm)
	if err != nil {
		t.Fatal(err)
	}
	rec.HookSidecar = &HookSidecarRecord{Entry: entry, Written: next}
	if present {
		rec.HookSidecar.Previous = &value
	}
	meta := tpl["metadata"].(map[string]any)
	if meta["annotations"] == nil {
		meta["annotations"] = map[string]any{}
	}
	meta["annotations"].(map[string]any)[HookSidecarsAnnotation] = next
	if err := writeRecord(vm, rec); err != nil {
		t.Fatal(err)
	}
}

// appended returns the list's value with entry spliced in after the last
// entry, as the legacy wiring wrote it.
func appended(l *hookList, entry []byte) string {
	if len(l.spans) == 0 {
		return l.value[:l.open] + string(entry) + l.value[l.open:]
	}
	at := l.spans[len(l.spans)-1][1]
	return l.value[:at] + "," + string(entry) + l.value[at:]
}

// vmWithHookAnnotation is a VM whose template annotations are exactly the
// given JSON object ("" for no annotations map).
func vmWithHookAnnotation(t *testing.T, annotations string) map[string]any {
	t.Helper()
	meta := `"metadata":{"labels":{"kubevirt.io/domain":"db-0"}},`
	if annotations != "" {
		meta = fmt.Sprintf(`"metadata":{"labels":{"kubevirt.io/domain":"db-0"},"annotations":%s},`, annotations)
	}
	return decode(t, `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"db-0","namespace":"apps"},
	 "spec":{"template":{`+meta+`"spec":{"domain":{"devices":{}}}}}}`)
}

// annotationsJSON encodes a {key: value} annotations object.
func annotationsJSON(t *testing.T, kv map[string]string) string {
	t.Helper()
	return canonical(t, kv)
}

// hookValue returns the template's hook sidecar annotation and whether it is there.
func hookValue(t *testing.T, vm map[string]any) (string, bool) {
	t.Helper()
	tpl, err := template(vm)
	if err != nil {
		t.Fatalf("bad test VM: %v", err)
	}
	v, present, err := hookAnnotation(tpl)
	if err != nil {
		t.Fatalf("bad hook annotation: %v", err)
	}
	return v, present
}

// hookString is hookValue as one string, "<absent>" when absent.
func hookString(t *testing.T, vm map[string]any) string {
	t.Helper()
	v, present := hookValue(t, vm)
	if !present {
		return "<absent>"
	}
	return v
}

func TestHookSidecarWireUnwireRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		// annotations are the template's (JSON object, "" for none).
		annotations string
		// wired is the annotation after Wire; "" means absent.
		wired string
		// recorded: the Record names our entry (false when the user's own
		// entry already runs the hook image).
		recorded bool
	}{
		{name: "no annotations map", annotations: "",
			wired: "[" + ourEntry + "]", recorded: true},
		{name: "annotations without hookSidecars", annotations: `{"x":"1"}`,
			wired: "[" + ourEntry + "]", recorded: true},
		{name: "empty list", annotations: `{"hooks.kubevirt.io/hookSidecars":"[]"}`,
			wired: "[" + ourEntry + "]", recorded: true},
		{name: "empty list with whitespace", annotations: `{"hooks.kubevirt.io/hookSidecars":" [ \n ] "}`,
			wired: " [" + ourEntry + " \n ] ", recorded: true},
		{name: "the user's own entry is kept as written", annotations: annotationsJSON(t, map[string]string{HookSidecarsAnnotation: "[" + userEntry + "]"}),
			wired: "[" + userEntry + "," + ourEntry + "]", recorded: true},
		{name: "two user entries, pretty-printed", annotations: annotationsJSON(t, map[string]string{HookSidecarsAnnotation: "[\n  " + userEntry + ",\n  {\"image\": \"b\"}\n]\n"}),
			wired: "[\n  " + userEntry + ",\n  {\"image\": \"b\"}," + ourEntry + "\n]\n", recorded: true},
		{name: "the user already runs the hook image", annotations: annotationsJSON(t, map[string]string{HookSidecarsAnnotation: `[{"image": "` + hookImage + `"}]`}),
			wired: `[{"image": "` + hookImage + `"}]`, recorded: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			original := vmWithHookAnnotation(t, tc.annotations)
			want := canonical(t, original)
			before, beforePresent := hookValue(t, original)

			obj := vmWithHookAnnotation(t, tc.annotations)
			d := full(v1alpha1.PlacementRequired)
			legacyWire(t, obj, d, hookImage)
			got, present := hookValue(t, obj)
			g.Expect(present).To(gomega.BeTrue())
			g.Expect(got).To(gomega.Equal(tc.wired))
			l, err := parseHookList(got)
			g.Expect(err).NotTo(gomega.HaveOccurred(), "still a JSON list of KubeVirt hook sidecars")
			g.Expect(l.images).To(gomega.ContainElement(hookImage))

			rec, err := ReadRecord(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			if tc.recorded {
				g.Expect(rec.HookSidecar).NotTo(gomega.BeNil())
				g.Expect(string(rec.HookSidecar.Entry)).To(gomega.Equal(ourEntry))
				g.Expect(rec.HookSidecar.Written).To(gomega.Equal(tc.wired))
				if beforePresent {
					g.Expect(rec.HookSidecar.Previous).To(gomega.HaveValue(gomega.Equal(before)))
				} else {
					g.Expect(rec.HookSidecar.Previous).To(gomega.BeNil())
				}
			} else {
				g.Expect(rec.HookSidecar).To(gomega.BeNil())
			}

			obj = roundTrip(t, obj)
			g.Expect(IsWired(obj, d)).To(gomega.Equal(!tc.recorded), "Wire takes a recorded legacy entry out")
			migrated := roundTrip(t, obj)
			changed, err := Unwire(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(changed).To(gomega.BeTrue())
			g.Expect(canonical(t, obj)).To(gomega.Equal(want))
			after, afterPresent := hookValue(t, obj)
			g.Expect(afterPresent).To(gomega.Equal(beforePresent))
			g.Expect(after).To(gomega.Equal(before), "byte for byte")

			// Upgrade: Wire migrates the VM to the binding plugin, giving the
			// annotation back as it was before, and Unwire still restores it all.
			_, err = Wire(migrated, d)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			after, afterPresent = hookValue(t, migrated)
			g.Expect(afterPresent).To(gomega.Equal(beforePresent))
			g.Expect(after).To(gomega.Equal(before), "byte for byte")
			rec, err = ReadRecord(migrated)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(rec.HookSidecar).To(gomega.BeNil())
			g.Expect(IsWired(migrated, d)).To(gomega.BeTrue())
			_, err = Unwire(migrated)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(canonical(t, migrated)).To(gomega.Equal(want))
		})
	}
}

// TestHookSidecarMalformedUserAnnotationIsLeftAlone: the annotation is the
// user's; without a legacy entry of ours in it, Wire and Unwire never read it.
func TestHookSidecarMalformedUserAnnotationIsLeftAlone(t *testing.T) {
	for _, value := range []string{`hook-me`, `{"image": "x"}`, `null`, ``, `["x"]`, `[{"image": "a"}`, `[] []`} {
		t.Run(value, func(t *testing.T) {
			g := gomega.NewWithT(t)
			obj := vmWithHookAnnotation(t, annotationsJSON(t, map[string]string{HookSidecarsAnnotation: value}))
			before := canonical(t, obj)
			changed, err := Wire(obj, full(v1alpha1.PlacementRequired))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(changed).To(gomega.BeTrue())
			g.Expect(hookString(t, obj)).To(gomega.Equal(value))
			_, err = Unwire(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(canonical(t, obj)).To(gomega.Equal(before))
		})
	}
}

// setHook sets the template's hook sidecar annotation as a user would.
func setHook(t *testing.T, vm map[string]any, value string) {
	t.Helper()
	tpl, err := template(vm)
	if err != nil {
		t.Fatalf("bad test VM: %v", err)
	}
	tpl["metadata"].(map[string]any)["annotations"].(map[string]any)[HookSidecarsAnnotation] = value
}

func TestHookSidecarUserChangesWhileWired(t *testing.T) {
	wiredValue := "[" + userEntry + "," + ourEntry + "]"
	for _, tc := range []struct {
		name string
		// change is the user's new value of the annotation ("<absent>" deletes it).
		change string
		// unwired is the value after Unwire, and after Wire's migration.
		unwired string
	}{
		{name: "appends an entry after ours", change: "[" + userEntry + "," + ourEntry + `, {"image": "later"}]`,
			unwired: "[" + userEntry + `, {"image": "later"}]`},
		{name: "puts an entry before all", change: `[{"image": "first"},` + userEntry + "," + ourEntry + "]",
			unwired: `[{"image": "first"},` + userEntry + "]"},
		{name: "reformats the list", change: "[\n " + userEntry + ",\n " + ourEntry + "\n]",
			unwired: "[\n " + userEntry + "\n]"},
		{name: "re-applies its manifest without our entry", change: "[" + userEntry + "]",
			unwired: "[" + userEntry + "]"},
		{name: "drops its own entry", change: "[" + ourEntry + "]",
			unwired: "[]"},
		{name: "removes the annotation", change: "<absent>",
			unwired: "<absent>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			d := full(v1alpha1.PlacementPreferred)
			change := func(vm map[string]any) {
				if tc.change == "<absent>" {
					tpl, _ := template(vm)
					delete(tpl["metadata"].(map[string]any)["annotations"].(map[string]any), HookSidecarsAnnotation)
					return
				}
				setHook(t, vm, tc.change)
			}
			start := annotationsJSON(t, map[string]string{HookSidecarsAnnotation: "[" + userEntry + "]"})

			for _, undo := range []func(map[string]any) (bool, error){
				Unwire,
				func(vm map[string]any) (bool, error) { return Wire(vm, d) },
			} {
				obj := vmWithHookAnnotation(t, start)
				legacyWire(t, obj, d, hookImage)
				g.Expect(hookString(t, obj)).To(gomega.Equal(wiredValue))
				change(obj)
				obj = roundTrip(t, obj)
				_, err := undo(obj)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(hookString(t, obj)).To(gomega.Equal(tc.unwired), "only our entry goes")
				rec, err := ReadRecord(obj)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				if rec != nil {
					g.Expect(rec.HookSidecar).To(gomega.BeNil())
				}
			}
		})
	}
}

func TestHookSidecarMadeUnreadableWhileWired(t *testing.T) {
	g := gomega.NewWithT(t)
	d := full(v1alpha1.PlacementRequired)
	obj := vmWithHookAnnotation(t, `{"hooks.kubevirt.io/hookSidecars":"[]"}`)
	legacyWire(t, obj, d, hookImage)
	setHook(t, obj, "["+ourEntry) // a bad hand edit
	before := canonical(t, obj)

	changed, err := Wire(obj, d)
	g.Expect(changed).To(gomega.BeFalse())
	var conflict *ConflictError
	g.Expect(err).To(gomega.BeAssignableToTypeOf(conflict))
	g.Expect(err.Error()).To(gomega.HavePrefix(`spec.template.metadata.annotations["hooks.kubevirt.io/hookSidecars"] is not a JSON list`))

	changed, err = Unwire(obj)
	g.Expect(changed).To(gomega.BeFalse())
	g.Expect(err).To(gomega.MatchError(gomega.HavePrefix(`failed to unwire VM: spec.template.metadata.annotations["hooks.kubevirt.io/hookSidecars"] is not a JSON list`)))
	g.Expect(err).NotTo(gomega.BeAssignableToTypeOf(conflict))
	g.Expect(canonical(t, obj)).To(gomega.Equal(before), "the VM is unchanged")
	g.Expect(Owner(obj)).To(gomega.Equal("db-link"), "the record stays, so a fixed value is unwired later")

	// Once the user fixes it, Unwire finishes.
	setHook(t, obj, "["+ourEntry+"]")
	_, err = Unwire(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(hookString(t, obj)).To(gomega.Equal("[]"))
}

func TestHookListEdits(t *testing.T) {
	for _, tc := range []struct {
		value    string
		images   []string
		appended string
		// without[i] is the value without entry i.
		without []string
	}{
		{value: `[]`, images: nil, appended: `[E]`},
		{value: ` [ ] `, images: nil, appended: ` [E ] `},
		{value: `[{"image":"a"}]`, images: []string{"a"}, appended: `[{"image":"a"},E]`, without: []string{`[]`}},
		{value: `[ {"image":"a"} , {} ,{"image":"c","args":["x"]} ]`, images: []string{"a", "", "c"},
			appended: `[ {"image":"a"} , {} ,{"image":"c","args":["x"]},E ]`,
			without:  []string{`[ {} ,{"image":"c","args":["x"]} ]`, `[ {"image":"a"} ,{"image":"c","args":["x"]} ]`, `[ {"image":"a"} , {} ]`}},
		{value: "[null]", images: []string{""}, appended: "[null,E]", without: []string{"[]"}},
	} {
		t.Run(tc.value, func(t *testing.T) {
			g := gomega.NewWithT(t)
			l, err := parseHookList(tc.value)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(l.images).To(gomega.Equal(tc.images))
			g.Expect(appended(l, []byte("E"))).To(gomega.Equal(tc.appended))
			for i, want := range tc.without {
				g.Expect(l.without(i)).To(gomega.Equal(want), "without %d", i)
				var v []any
				g.Expect(json.Unmarshal([]byte(l.without(i)), &v)).To(gomega.Succeed(), "still a JSON list")
			}
		})
	}
}

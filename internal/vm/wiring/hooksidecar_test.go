package wiring

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/onsi/gomega"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

const (
	hookImage  = "registry.example.com/fastpath/fastpath-domain-hook:v0.1.0"
	hookImage2 = "registry.example.com/fastpath/fastpath-domain-hook:v0.2.0"
	// ourEntry is the entry the operator writes for hookImage.
	ourEntry = `{"args":["--version","v1alpha3"],"image":"` + hookImage + `"}`
	// userEntry is a user's own hook sidecar, written the way people do (spaces).
	userEntry = `{"args": ["--version", "v1alpha2"], "image": "registry.example.com/smbios-hook:v1"}`
)

func withHook(d Desired, image string) Desired {
	d.DomainHookImage = image
	return d
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
			d := withHook(full(v1alpha1.PlacementRequired), hookImage)
			changed, err := Wire(obj, d)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(changed).To(gomega.BeTrue())
			got, present := hookValue(t, obj)
			g.Expect(present).To(gomega.BeTrue())
			g.Expect(got).To(gomega.Equal(tc.wired))
			images, err := HookSidecarImages(got)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(images).To(gomega.ContainElement(hookImage))

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
			g.Expect(IsWired(obj, d)).To(gomega.BeTrue())
			changed, err = Unwire(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(changed).To(gomega.BeTrue())
			g.Expect(canonical(t, obj)).To(gomega.Equal(want))
			after, afterPresent := hookValue(t, obj)
			g.Expect(afterPresent).To(gomega.Equal(beforePresent))
			g.Expect(after).To(gomega.Equal(before), "byte for byte")
		})
	}
}

func TestHookSidecarMalformedUserAnnotationIsAConflict(t *testing.T) {
	for _, tc := range []struct{ name, value, reason string }{
		{"not JSON", `hook-me`, "invalid character"},
		{"an object, not a list", `{"image": "x"}`, "the value starts with {"},
		{"JSON null", `null`, "the value starts with null"},
		{"empty string", ``, "EOF"},
		{"an entry that is not an object", `["x"]`, "entry 0 as a KubeVirt hook sidecar"},
		{"an image that is not a string", `[{"image": 5}]`, "entry 0 as a KubeVirt hook sidecar"},
		{"args that are not strings", `[{"image": "a"}, {"args": [1]}]`, "entry 1 as a KubeVirt hook sidecar"},
		{"unterminated", `[{"image": "a"}`, "end of the JSON list"},
		{"trailing data", `[] []`, "after its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			obj := vmWithHookAnnotation(t, annotationsJSON(t, map[string]string{HookSidecarsAnnotation: tc.value}))
			before := canonical(t, obj)
			d := withHook(full(v1alpha1.PlacementRequired), hookImage)
			changed, err := Wire(obj, d)
			g.Expect(changed).To(gomega.BeFalse())
			var conflict *ConflictError
			g.Expect(err).To(gomega.BeAssignableToTypeOf(conflict))
			conflict = err.(*ConflictError)
			g.Expect(conflict.Field).To(gomega.Equal(`metadata.annotations["hooks.kubevirt.io/hookSidecars"]`))
			g.Expect(err.Error()).To(gomega.HavePrefix(`spec.template.metadata.annotations["hooks.kubevirt.io/hookSidecars"] is not a JSON list of KubeVirt hook sidecars (`))
			g.Expect(err.Error()).To(gomega.ContainSubstring(tc.reason))
			g.Expect(err.Error()).To(gomega.ContainSubstring("fastpath-operator leaves it unchanged"))
			g.Expect(canonical(t, obj)).To(gomega.Equal(before), "the VM is unchanged")
			g.Expect(IsWired(obj, d)).To(gomega.BeFalse())

			// Without a hook image the annotation is none of our business.
			changed, err = Wire(obj, full(v1alpha1.PlacementRequired))
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(changed).To(gomega.BeTrue())
			g.Expect(hookString(t, obj)).To(gomega.Equal(tc.value))
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
		// rewired is the value after the next Wire; unwired after Unwire.
		rewired, unwired string
	}{
		{name: "appends an entry after ours", change: "[" + userEntry + "," + ourEntry + `, {"image": "later"}]`,
			rewired: "[" + userEntry + "," + ourEntry + `, {"image": "later"}]`, unwired: "[" + userEntry + `, {"image": "later"}]`},
		{name: "puts an entry before all", change: `[{"image": "first"},` + userEntry + "," + ourEntry + "]",
			rewired: `[{"image": "first"},` + userEntry + "," + ourEntry + "]", unwired: `[{"image": "first"},` + userEntry + "]"},
		{name: "reformats the list", change: "[\n " + userEntry + ",\n " + ourEntry + "\n]",
			rewired: "[\n " + userEntry + ",\n " + ourEntry + "\n]", unwired: "[\n " + userEntry + "\n]"},
		{name: "re-applies its manifest without our entry", change: "[" + userEntry + "]",
			rewired: "[" + userEntry + "," + ourEntry + "]", unwired: "[" + userEntry + "]"},
		{name: "drops its own entry", change: "[" + ourEntry + "]",
			rewired: "[" + ourEntry + "]", unwired: "[]"},
		{name: "removes the annotation", change: "<absent>",
			rewired: "[" + ourEntry + "]", unwired: "<absent>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			d := withHook(full(v1alpha1.PlacementPreferred), hookImage)
			change := func(vm map[string]any) {
				if tc.change == "<absent>" {
					tpl, _ := template(vm)
					delete(tpl["metadata"].(map[string]any)["annotations"].(map[string]any), HookSidecarsAnnotation)
					return
				}
				setHook(t, vm, tc.change)
			}
			start := annotationsJSON(t, map[string]string{HookSidecarsAnnotation: "[" + userEntry + "]"})

			// Unwire right after the change: only our entry goes.
			obj := vmWithHookAnnotation(t, start)
			_, err := Wire(obj, d)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(hookString(t, obj)).To(gomega.Equal(wiredValue))
			change(obj)
			obj = roundTrip(t, obj)
			_, err = Unwire(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(hookString(t, obj)).To(gomega.Equal(tc.unwired))
			rec, err := ReadRecord(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(rec).To(gomega.BeNil())

			// Wire again after the change: our entry is back once, the user's
			// change stays, and Unwire then gives the user's value back exactly.
			obj = vmWithHookAnnotation(t, start)
			_, err = Wire(obj, d)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			change(obj)
			_, err = Wire(obj, d)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(hookString(t, obj)).To(gomega.Equal(tc.rewired))
			changed, err := Wire(roundTrip(t, obj), d)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(changed).To(gomega.BeFalse())
			_, err = Unwire(obj)
			g.Expect(err).NotTo(gomega.HaveOccurred())
			if tc.rewired == tc.change {
				// Our entry survived the change: Unwire cuts it out.
				g.Expect(hookString(t, obj)).To(gomega.Equal(tc.unwired))
			} else {
				// Wire appended it again to the user's value: Unwire restores that.
				g.Expect(hookString(t, obj)).To(gomega.Equal(tc.change))
			}
		})
	}
}

func TestHookSidecarMadeUnreadableWhileWired(t *testing.T) {
	g := gomega.NewWithT(t)
	d := withHook(full(v1alpha1.PlacementRequired), hookImage)
	obj := vmWithHookAnnotation(t, `{"hooks.kubevirt.io/hookSidecars":"[]"}`)
	_, err := Wire(obj, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
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

func TestHookSidecarConvergesWithTheImage(t *testing.T) {
	g := gomega.NewWithT(t)
	start := annotationsJSON(t, map[string]string{HookSidecarsAnnotation: "[" + userEntry + "]", "x": "1"})
	original := canonical(t, vmWithHookAnnotation(t, start))
	obj := vmWithHookAnnotation(t, start)
	base := full(v1alpha1.PlacementRequired)
	entry2 := `{"args":["--version","v1alpha3"],"image":"` + hookImage2 + `"}`

	for i, step := range []struct {
		d    Desired
		want string
	}{
		{withHook(base, hookImage), "[" + userEntry + "," + ourEntry + "]"},
		{withHook(base, hookImage2), "[" + userEntry + "," + entry2 + "]"}, // operator upgraded
		{base, "[" + userEntry + "]"},                                      // --domain-hook-image emptied
		{withHook(base, hookImage), "[" + userEntry + "," + ourEntry + "]"},
		{Desired{Attachment: "db-link", VSOCK: true, DomainHookImage: hookImage}, "[" + userEntry + "]"}, // network removed: no tuning, no hook
	} {
		_, err := Wire(obj, step.d)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "step %d", i)
		obj = roundTrip(t, obj)
		g.Expect(hookString(t, obj)).To(gomega.Equal(step.want), "step %d", i)
		rec, err := ReadRecord(obj)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		if step.want == "["+userEntry+"]" {
			g.Expect(rec.HookSidecar).To(gomega.BeNil(), "step %d", i)
		} else {
			g.Expect(rec.HookSidecar.Previous).To(gomega.HaveValue(gomega.Equal("["+userEntry+"]")), "step %d", i)
		}
	}
	_, err := Unwire(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, obj)).To(gomega.Equal(original))
}

func TestHookSidecarEntryFormat(t *testing.T) {
	g := gomega.NewWithT(t)
	data, err := json.Marshal(DomainHookSidecar(hookImage))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(string(data)).To(gomega.Equal(ourEntry))
	// What KubeVirt v1.6.0 hooks.UnmarshalHookSidecarList reads from it.
	var list []kubevirtHookSidecar
	g.Expect(json.Unmarshal([]byte("["+string(data)+"]"), &list)).To(gomega.Succeed())
	g.Expect(list).To(gomega.HaveLen(1))
	g.Expect(list[0].Image).To(gomega.Equal(hookImage))
	g.Expect(list[0].Args).To(gomega.Equal([]string{"--version", "v1alpha3"}))
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
			g.Expect(l.appended([]byte("E"))).To(gomega.Equal(tc.appended))
			for i, want := range tc.without {
				g.Expect(l.without(i)).To(gomega.Equal(want), "without %d", i)
				var v []any
				g.Expect(json.Unmarshal([]byte(l.without(i)), &v)).To(gomega.Succeed(), "still a JSON list")
			}
		})
	}
}

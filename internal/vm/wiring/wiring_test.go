package wiring

import (
	"encoding/json"
	"testing"

	"github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// decode parses JSON the way client-go's unstructured decoder does (integers
// become int64), so the tests see what the operator sees.
func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := utiljson.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("bad test JSON: %v", err)
	}
	return m
}

// canonical is the encoding the API server would store (sorted keys).
func canonical(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("failed to encode: %v", err)
	}
	return string(data)
}

// roundTrip encodes and decodes, as a write to and a read from the API server.
func roundTrip(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	return decode(t, canonical(t, m))
}

const minimalVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
 "metadata":{"name":"db-0","namespace":"apps"},
 "spec":{"runStrategy":"Always","template":{"spec":{"domain":{"resources":{"requests":{"memory":"1Gi"}}}}}}}`

const busyVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
 "metadata":{"name":"db-1","namespace":"apps","labels":{"app":"db"},"annotations":{"owner":"team-a"}},
 "spec":{"runStrategy":"Always","template":{
  "metadata":{"creationTimestamp":null,"labels":{"kubevirt.io/domain":"db-1","zone":"a"},"annotations":{"hooks.kubevirt.io/hookSidecars":"[]","x":"1"}},
  "spec":{
   "domain":{"cpu":{"cores":4},"devices":{
     "autoattachVSOCK":false,"networkInterfaceMultiqueue":false,
     "disks":[{"name":"root","disk":{"bus":"virtio"}}],
     "interfaces":[{"name":"default","masquerade":{}},{"name":"storage","bridge":{},"macAddress":"02:00:00:00:00:01"}]},
    "resources":{"requests":{"memory":"2Gi","cpu":"1500m"}}},
   "networks":[{"name":"default","pod":{}},{"name":"storage","multus":{"networkName":"storage-net"}}],
   "affinity":{"podAffinity":{
     "requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"cache"}},"topologyKey":"topology.kubernetes.io/zone"}],
     "preferredDuringSchedulingIgnoredDuringExecution":[{"weight":7,"podAffinityTerm":{"labelSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["web"]}]},"topologyKey":"kubernetes.io/hostname"}}]},
    "nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"fast","operator":"Exists"}]}]}}},
   "terminationGracePeriodSeconds":0}}}}`

const emptyListsVM = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
 "metadata":{"name":"db-2","namespace":"apps"},
 "spec":{"template":{"metadata":{"labels":{},"annotations":{}},
  "spec":{"domain":{"devices":{"interfaces":[],"autoattachVSOCK":true}},"networks":[],"affinity":{}}}}}`

func full(placement v1alpha1.Placement) Desired {
	return Desired{
		Attachment: "db-link",
		Network: &Network{NetworkAttachmentDefinition: "db-link", Binding: DefaultBinding, Tuning: domaintuning.Interface{
			MTU: 9000, Queues: 4, RxQueueSize: 1024, TxQueueSize: 256,
			Offloads: domaintuning.Offloads{TSO: "On", GSO: "On", GRO: "On", TXChecksum: "On"},
		}},
		VSOCK:     true,
		Placement: placement,
	}
}

// withBinding is d with its interface on binding plugin name.
func withBinding(d Desired, name string) Desired {
	n := *d.Network
	n.Binding = name
	d.Network = &n
	return d
}

func TestWireUnwireRestoresTheOriginalByteForByte(t *testing.T) {
	desires := map[string]Desired{
		"network+vsock, Required":  full(v1alpha1.PlacementRequired),
		"network+vsock, Preferred": full(v1alpha1.PlacementPreferred),
		"network, one queue, None": {Attachment: "db-link", Network: &Network{NetworkAttachmentDefinition: "db-link", Tuning: domaintuning.Interface{MTU: 1500, Queues: 1}}, Placement: v1alpha1.PlacementNone},
		"vsock only, Required":     {Attachment: "db-link", VSOCK: true, Placement: v1alpha1.PlacementRequired},
		"network+vsock, macvtap":   withBinding(full(v1alpha1.PlacementRequired), DefaultMacvtapBinding),
		"MigrateTogether, Required": func() Desired {
			d := full(v1alpha1.PlacementRequired)
			d.EvictionStrategy = EvictionStrategyExternal
			return d
		}(),
		"MigrateTogether, moving": func() Desired {
			d := full(v1alpha1.PlacementRequired)
			d.EvictionStrategy, d.SuspendPlacement = EvictionStrategyExternal, true
			return d
		}(),
	}
	for vmName, vm := range map[string]string{"minimal": minimalVM, "busy": busyVM, "empty lists": emptyListsVM} {
		for dName, d := range desires {
			t.Run(vmName+"/"+dName, func(t *testing.T) {
				g := gomega.NewWithT(t)
				original := decode(t, vm)
				want := canonical(t, original)

				obj := decode(t, vm)
				changed, err := Wire(obj, d)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(changed).To(gomega.BeTrue())
				g.Expect(canonical(t, obj)).NotTo(gomega.Equal(want))
				g.Expect(Owner(obj)).To(gomega.Equal("db-link"))

				// Stored and read back, a second Wire changes nothing.
				obj = roundTrip(t, obj)
				g.Expect(IsWired(obj, d)).To(gomega.BeTrue())
				changed, err = Wire(obj, d)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(changed).To(gomega.BeFalse())

				obj = roundTrip(t, obj)
				changed, err = Unwire(obj)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(changed).To(gomega.BeTrue())
				g.Expect(canonical(t, obj)).To(gomega.Equal(want))
				g.Expect(IsWired(obj, d)).To(gomega.BeFalse())

				changed, err = Unwire(obj)
				g.Expect(err).NotTo(gomega.HaveOccurred())
				g.Expect(changed).To(gomega.BeFalse())
			})
		}
	}
}

func TestWireAddsOnlyOurEntries(t *testing.T) {
	g := gomega.NewWithT(t)
	obj := decode(t, busyVM)
	_, err := Wire(obj, full(v1alpha1.PlacementRequired))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	tpl := obj["spec"].(map[string]any)["template"].(map[string]any)

	wantTemplate := decode(t, `{
  "metadata":{"creationTimestamp":null,
   "labels":{"kubevirt.io/domain":"db-1","zone":"a","fastpath.io/attachment":"db-link"},
   "annotations":{"hooks.kubevirt.io/hookSidecars":"[]","x":"1",
     "fastpath.io/tuning":"{\"interfaces\":{\"fp-db-link\":{\"mtu\":9000,\"queues\":4,\"rxQueueSize\":1024,\"txQueueSize\":256,\"offloads\":{\"tso\":\"On\",\"gso\":\"On\",\"gro\":\"On\",\"txChecksum\":\"On\"}}}}"}},
  "spec":{
   "domain":{"cpu":{"cores":4},"devices":{
     "autoattachVSOCK":true,"networkInterfaceMultiqueue":true,
     "disks":[{"name":"root","disk":{"bus":"virtio"}}],
     "interfaces":[{"name":"default","masquerade":{}},{"name":"storage","bridge":{},"macAddress":"02:00:00:00:00:01"},
                   {"name":"fp-db-link","binding":{"name":"fastpath"},"model":"virtio"}]},
    "resources":{"requests":{"memory":"2Gi","cpu":"1500m"}}},
   "networks":[{"name":"default","pod":{}},{"name":"storage","multus":{"networkName":"storage-net"}},
               {"name":"fp-db-link","multus":{"networkName":"db-link"}}],
   "affinity":{"podAffinity":{
     "requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"cache"}},"topologyKey":"topology.kubernetes.io/zone"},
        {"labelSelector":{"matchLabels":{"fastpath.io/attachment":"db-link"}},"topologyKey":"kubernetes.io/hostname"}],
     "preferredDuringSchedulingIgnoredDuringExecution":[{"weight":7,"podAffinityTerm":{"labelSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["web"]}]},"topologyKey":"kubernetes.io/hostname"}}]},
    "nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"fast","operator":"Exists"}]}]}}},
   "terminationGracePeriodSeconds":0}}`)
	g.Expect(canonical(t, tpl)).To(gomega.Equal(canonical(t, wantTemplate)))

	rec, err := ReadRecord(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(rec).To(gomega.Equal(&Record{
		Attachment: "db-link",
		Added:      []Item{ItemNetwork, ItemInterface, ItemLabel, ItemTuning, ItemRequiredAffinity},
		Scalars: []Scalar{
			{Field: "spec.domain.devices.autoattachVSOCK", Previous: json.RawMessage("false")},
			{Field: "spec.domain.devices.networkInterfaceMultiqueue", Previous: json.RawMessage("false")},
		},
	}))
	// The user's metadata annotation is still there next to the record.
	g.Expect(obj["metadata"].(map[string]any)["annotations"]).To(gomega.HaveKeyWithValue("owner", "team-a"))
}

func TestWireRecordsCreatedContainersOnAMinimalVM(t *testing.T) {
	g := gomega.NewWithT(t)
	obj := decode(t, minimalVM)
	_, err := Wire(obj, full(v1alpha1.PlacementPreferred))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	rec, err := ReadRecord(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(rec.Created).To(gomega.ConsistOf(
		"spec.networks", "spec.domain.devices", "spec.domain.devices.interfaces",
		"metadata", "metadata.labels", "metadata.annotations",
		"spec.affinity", "spec.affinity.podAffinity", "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution"))
	g.Expect(rec.Scalars).To(gomega.ConsistOf(
		Scalar{Field: "spec.domain.devices.autoattachVSOCK"},
		Scalar{Field: "spec.domain.devices.networkInterfaceMultiqueue"}))
	pref := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["affinity"].(map[string]any)["podAffinity"].(map[string]any)["preferredDuringSchedulingIgnoredDuringExecution"]
	g.Expect(canonical(t, pref)).To(gomega.Equal(`[{"podAffinityTerm":{"labelSelector":{"matchLabels":{"fastpath.io/attachment":"db-link"}},"topologyKey":"kubernetes.io/hostname"},"weight":100}]`))
}

func TestWireConvergesAChangedAttachment(t *testing.T) {
	g := gomega.NewWithT(t)
	original := canonical(t, decode(t, busyVM))
	obj := decode(t, busyVM)

	steps := []Desired{
		full(v1alpha1.PlacementRequired),
		full(v1alpha1.PlacementPreferred),
		{Attachment: "db-link", Network: &Network{NetworkAttachmentDefinition: "db-link", Tuning: domaintuning.Interface{MTU: 65535, Queues: 1}}, Placement: v1alpha1.PlacementNone},
		{Attachment: "db-link", VSOCK: true, Placement: v1alpha1.PlacementRequired},
		full(v1alpha1.PlacementRequired),
	}
	for i, d := range steps {
		_, err := Wire(obj, d)
		g.Expect(err).NotTo(gomega.HaveOccurred(), "step %d", i)
		obj = roundTrip(t, obj)

		// Every step leaves exactly the wiring a fresh Wire of the original gives.
		fresh := decode(t, busyVM)
		_, err = Wire(fresh, d)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(canonical(t, obj["spec"])).To(gomega.Equal(canonical(t, fresh["spec"])), "step %d", i)
	}
	_, err := Unwire(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, obj)).To(gomega.Equal(original))
}

func TestWireKeepsTheUsersChangesMadeWhileWired(t *testing.T) {
	g := gomega.NewWithT(t)
	obj := decode(t, minimalVM)
	_, err := Wire(obj, full(v1alpha1.PlacementRequired))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	// The user adds an interface and a label while the VM is wired.
	tpl := obj["spec"].(map[string]any)["template"].(map[string]any)
	devices := tpl["spec"].(map[string]any)["domain"].(map[string]any)["devices"].(map[string]any)
	devices["interfaces"] = append(devices["interfaces"].([]any), map[string]any{"name": "mine", "bridge": map[string]any{}})
	tpl["metadata"].(map[string]any)["labels"].(map[string]any)["team"] = "a"

	_, err = Unwire(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, tpl)).To(gomega.Equal(
		`{"metadata":{"labels":{"team":"a"}},"spec":{"domain":{"devices":{"interfaces":[{"bridge":{},"name":"mine"}]},"resources":{"requests":{"memory":"1Gi"}}}}}`))
}

func TestUsersEqualEntriesStayTheirs(t *testing.T) {
	g := gomega.NewWithT(t)
	vm := `{"metadata":{"name":"v"},"spec":{"template":{"metadata":{"labels":{"fastpath.io/attachment":"db-link"}},"spec":{"domain":{},
	 "affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"fastpath.io/attachment":"db-link"}},"topologyKey":"kubernetes.io/hostname"}]}}}}}}`
	obj := decode(t, vm)
	_, err := Wire(obj, Desired{Attachment: "db-link", VSOCK: true, Placement: v1alpha1.PlacementRequired})
	g.Expect(err).NotTo(gomega.HaveOccurred())
	rec, err := ReadRecord(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(rec.Added).To(gomega.BeEmpty())
	req := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["affinity"].(map[string]any)["podAffinity"].(map[string]any)["requiredDuringSchedulingIgnoredDuringExecution"]
	g.Expect(req).To(gomega.HaveLen(1))

	_, err = Unwire(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, obj)).To(gomega.Equal(canonical(t, decode(t, vm))))
}

func TestWireConflicts(t *testing.T) {
	wired := decode(t, minimalVM)
	if _, err := Wire(wired, full(v1alpha1.PlacementRequired)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		vm   map[string]any
		want ConflictError
	}{
		{name: "user interface of our name", want: ConflictError{Field: "spec.domain.devices.interfaces[name=fp-db-link]"},
			vm: decode(t, `{"metadata":{"name":"v"},"spec":{"template":{"spec":{"domain":{"devices":{"interfaces":[{"name":"fp-db-link","masquerade":{}}]}}}}}}`)},
		{name: "user network of our name", want: ConflictError{Field: "spec.networks[name=fp-db-link]"},
			vm: decode(t, `{"metadata":{"name":"v"},"spec":{"template":{"spec":{"domain":{},"networks":[{"name":"fp-db-link","pod":{}}]}}}}`)},
		{name: "label of another attachment", want: ConflictError{Field: `metadata.labels["fastpath.io/attachment"]`},
			vm: decode(t, `{"metadata":{"name":"v"},"spec":{"template":{"metadata":{"labels":{"fastpath.io/attachment":"other"}},"spec":{"domain":{}}}}}`)},
		{name: "user tuning annotation", want: ConflictError{Field: `metadata.annotations["fastpath.io/tuning"]`},
			vm: decode(t, `{"metadata":{"name":"v"},"spec":{"template":{"metadata":{"annotations":{"fastpath.io/tuning":"{}"}},"spec":{"domain":{}}}}}`)},
		{name: "wired by another attachment", want: ConflictError{HeldBy: "db-link"}, vm: wired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			before := canonical(t, tc.vm)
			d := full(v1alpha1.PlacementRequired)
			if tc.want.HeldBy != "" {
				d.Attachment = "other"
			}
			changed, err := Wire(tc.vm, d)
			g.Expect(changed).To(gomega.BeFalse())
			var conflict *ConflictError
			g.Expect(err).To(gomega.BeAssignableToTypeOf(conflict))
			g.Expect(*err.(*ConflictError)).To(gomega.Equal(tc.want))
			g.Expect(canonical(t, tc.vm)).To(gomega.Equal(before))
			g.Expect(IsWired(tc.vm, d)).To(gomega.BeFalse())
		})
	}
}

func TestWireRejectsMalformedVMs(t *testing.T) {
	for _, tc := range []struct{ name, vm, want string }{
		{"no template", `{"metadata":{"name":"v"},"spec":{}}`, "spec.template is missing"},
		{"networks not a list", `{"metadata":{"name":"v"},"spec":{"template":{"spec":{"domain":{},"networks":{"a":1}}}}}`, "spec.template.spec.networks is not a list"},
		{"devices not a map", `{"metadata":{"name":"v"},"spec":{"template":{"spec":{"domain":{"devices":[]}}}}}`, "spec.template.spec.domain.devices is not a map"},
		{"bad record", `{"metadata":{"name":"v","annotations":{"fastpath.io/wiring":"{"}},"spec":{"template":{"spec":{"domain":{}}}}}`, "failed to parse annotation fastpath.io/wiring"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := gomega.NewWithT(t)
			_, err := Wire(decode(t, tc.vm), full(v1alpha1.PlacementRequired))
			g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring(tc.want)))
		})
	}
}

func TestForAttachmentAppliesDefaults(t *testing.T) {
	g := gomega.NewWithT(t)
	att := &v1alpha1.FastPathAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "db-link"},
		Spec: v1alpha1.FastPathAttachmentSpec{
			Network: &v1alpha1.NetworkSpec{IPAM: v1alpha1.IPAMSpec{Subnet: "10.250.0.0/24"}},
			VSOCK:   &v1alpha1.VSOCKSpec{Services: []v1alpha1.VSOCKService{{Name: "db", VM: "db-0", Port: 5432}}},
		},
	}
	g.Expect(ForAttachment(att)).To(gomega.Equal(Desired{
		Attachment: "db-link",
		Network: &Network{NetworkAttachmentDefinition: "db-link", Binding: DefaultBinding, Tuning: domaintuning.Interface{
			MTU: 9000, Queues: 1, RxQueueSize: 1024, TxQueueSize: 256,
			Offloads: domaintuning.Offloads{TSO: "On", GSO: "On", GRO: "On", TXChecksum: "On", RXChecksum: "On"},
		}},
		VSOCK:            true,
		Placement:        v1alpha1.PlacementRequired,
		EvictionStrategy: EvictionStrategyExternal,
	}))
	att.Spec.Network = nil
	att.Spec.Placement = v1alpha1.PlacementNone
	g.Expect(ForAttachment(att)).To(gomega.Equal(Desired{Attachment: "db-link", VSOCK: true, Placement: v1alpha1.PlacementNone}))
}

// TestWireKeepsTheAttachmentUID: the Record names the attachment's uid; an
// attachment created again under the same name finds the earlier one's
// Record Stale, Wire refuses it unchanged, and after Unwire wires the VM with
// its own uid. A Record without a uid (written before the field) matches by
// name and gets the uid on the next Wire.
func TestWireKeepsTheAttachmentUID(t *testing.T) {
	g := gomega.NewWithT(t)
	first, second := full(v1alpha1.PlacementRequired), full(v1alpha1.PlacementRequired)
	first.AttachmentUID, second.AttachmentUID = "uid-1", "uid-2"

	vm := decode(t, busyVM)
	_, err := Wire(vm, first)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	vm = roundTrip(t, vm)
	g.Expect(OwnerUID(vm)).To(gomega.Equal("uid-1"))
	g.Expect(Stale(vm, "db-link", "uid-1")).To(gomega.BeFalse())
	g.Expect(Stale(vm, "db-link", "uid-2")).To(gomega.BeTrue())
	g.Expect(Stale(vm, "other", "uid-2")).To(gomega.BeFalse(), "another name is a conflict, not a stale record")
	g.Expect(IsWired(vm, first)).To(gomega.BeTrue())
	g.Expect(IsWired(vm, second)).To(gomega.BeFalse(), "the earlier attachment's wiring is not the new one's")

	before := canonical(t, vm)
	changed, err := Wire(vm, second)
	g.Expect(changed).To(gomega.BeFalse())
	var conflict *ConflictError
	g.Expect(err).To(gomega.BeAssignableToTypeOf(conflict))
	g.Expect(err.Error()).To(gomega.ContainSubstring("uid uid-1, an earlier attachment of that name"))
	g.Expect(canonical(t, vm)).To(gomega.Equal(before))

	_, err = Unwire(vm)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	changed, err = Wire(vm, second)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(changed).To(gomega.BeTrue())
	g.Expect(OwnerUID(roundTrip(t, vm))).To(gomega.Equal("uid-2"))

	legacy := decode(t, busyVM)
	_, err = Wire(legacy, full(v1alpha1.PlacementRequired))
	g.Expect(err).NotTo(gomega.HaveOccurred())
	legacy = roundTrip(t, legacy)
	g.Expect(OwnerUID(legacy)).To(gomega.BeEmpty())
	g.Expect(Stale(legacy, "db-link", "uid-2")).To(gomega.BeFalse())
	changed, err = Wire(legacy, second)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(changed).To(gomega.BeTrue(), "the uid is added to a record without one")
	g.Expect(OwnerUID(roundTrip(t, legacy))).To(gomega.Equal("uid-2"))
}

// TestMoveSuspendsTheRequiredTermAndEvictionStrategyComesBack: during a
// group move the required pod affinity term leaves the template and comes
// back after it, the user's other terms untouched; spec.evictionStrategy is
// External while wired and the user's own value (LiveMigrate) returns on
// Unwire.
func TestMoveSuspendsTheRequiredTermAndEvictionStrategyComesBack(t *testing.T) {
	g := gomega.NewWithT(t)
	vm := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"db-0","namespace":"apps"},
 "spec":{"template":{"spec":{"evictionStrategy":"LiveMigrate","domain":{},
  "affinity":{"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"cache"}},"topologyKey":"kubernetes.io/hostname"}]}}}}}}`
	original := canonical(t, decode(t, vm))
	d := Desired{Attachment: "db-link", Placement: v1alpha1.PlacementRequired, EvictionStrategy: EvictionStrategyExternal}
	required := func(obj map[string]any) []any {
		l, _, _ := unstructuredList(obj, "spec", "template", "spec", "affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
		return l
	}
	obj := decode(t, vm)
	_, err := Wire(obj, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["evictionStrategy"]).To(gomega.Equal("External"))
	g.Expect(required(obj)).To(gomega.HaveLen(2))
	g.Expect(SetsEvictionStrategy(obj)).To(gomega.BeTrue())

	moving := d
	moving.SuspendPlacement = true
	obj = roundTrip(t, obj)
	changed, err := Wire(obj, moving)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(changed).To(gomega.BeTrue())
	g.Expect(required(obj)).To(gomega.HaveLen(1), "only the user's term stays during a move")
	g.Expect(canonical(t, required(obj)[0])).To(gomega.ContainSubstring(`"app":"cache"`))

	obj = roundTrip(t, obj)
	_, err = Wire(obj, d)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(required(obj)).To(gomega.HaveLen(2), "the term is back after the move")

	obj = roundTrip(t, obj)
	_, err = Unwire(obj)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(canonical(t, obj)).To(gomega.Equal(original))
	g.Expect(SetsEvictionStrategy(obj)).To(gomega.BeFalse())
}

func unstructuredList(obj map[string]any, path ...string) ([]any, bool, error) {
	v, found, err := nested(obj, path)
	if err != nil || !found {
		return nil, found, err
	}
	l, _ := v.([]any)
	return l, true, nil
}

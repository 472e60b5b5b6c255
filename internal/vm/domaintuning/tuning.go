package domaintuning

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/api/wellknown"
)

// AnnotationKey is the template annotation that carries the tuning:
// v1alpha1.TuningAnnotation ("fastpath.io/tuning").
const AnnotationKey = v1alpha1.TuningAnnotation

// Limits of the tuning values. They mirror the FastPathAttachment API
// (api/v1alpha1/fastpathattachment_types.go), which takes them from QEMU and
// Linux: MTU wellknown.MinMTU to wellknown.MaxMTU; at most 256 virtio-net queue pairs (KubeVirt's multiqueue limit); virtio ring
// sizes 256, 512 or 1024 descriptors (QEMU VIRTIO_NET_RX_QUEUE_MIN_SIZE to
// VIRTQUEUE_MAX_SIZE for vhost-net; tx above 256 needs vhost-user).
const (
	MinQueues = 1
	MaxQueues = 256
)

// QueueSizes are the virtio ring sizes (descriptors) the annotation accepts.
var QueueSizes = []int32{256, 512, 1024}

// Annotation is the whole value of the fastpath.io/tuning annotation.
type Annotation struct {
	// Interfaces maps a VM network name ("fp-<attachment>") to its tuning.
	Interfaces map[string]Interface `json:"interfaces"`
}

// Interface is the tuning of one fast-path interface. A zero field means "not
// set": the domain hook leaves that part of the domain as KubeVirt made it.
type Interface struct {
	// MTU in bytes, wellknown.MinMTU-wellknown.MaxMTU (the domain <mtu size=...>).
	MTU int32 `json:"mtu,omitempty"`
	// Queues is the number of virtio-net queue pairs, MinQueues-MaxQueues
	// (<driver queues=...>), capped by the hook at the VM's vCPUs.
	Queues int32 `json:"queues,omitempty"`
	// RxQueueSize is the RX ring size in descriptors, one of QueueSizes
	// (<driver rx_queue_size=...>).
	RxQueueSize int32 `json:"rxQueueSize,omitempty"`
	// TxQueueSize is the TX ring size in descriptors, one of QueueSizes
	// (<driver tx_queue_size=...>); vhost-net accepts only 256.
	TxQueueSize int32 `json:"txQueueSize,omitempty"`
	// Offloads are the host and guest offloads (<driver><host .../><guest .../>).
	Offloads Offloads `json:"offloads,omitzero"`
}

// Offloads switch each offload On or Off; "" leaves it as it is. The
// annotation carries the API's own Offloads (the same JSON names); the libvirt
// attributes each switches are the Host and Guest of its wellknown.Offloads
// row.
type Offloads = v1alpha1.Offloads

// FromNetworkSpec returns the tuning of a FastPathAttachment's network. The
// spec must be defaulted (v1alpha1.DefaultAttachmentSpec); unset pointers give
// zero ("not set") fields.
func FromNetworkSpec(n v1alpha1.NetworkSpec) Interface {
	out := Interface{
		MTU:         deref(n.MTU),
		Queues:      deref(n.Queues),
		RxQueueSize: deref(n.RxQueueSize),
		TxQueueSize: deref(n.TxQueueSize),
	}
	if n.Offloads != nil {
		out.Offloads = *n.Offloads
	}
	return out
}

// Validate checks every set field against the limits above. The error names
// the field, e.g. `interfaces["fp-a"].rxQueueSize 300 is invalid: must be one of 256, 512, 1024`.
func (a Annotation) Validate() error {
	names := make([]string, 0, len(a.Interfaces))
	for name := range a.Interfaces {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "" {
			return fmt.Errorf("interfaces has an empty network name")
		}
		if err := a.Interfaces[name].validate(fmt.Sprintf("interfaces[%q]", name)); err != nil {
			return err
		}
	}
	return nil
}

func (i Interface) validate(field string) error {
	if i.MTU != 0 && (i.MTU < wellknown.MinMTU || i.MTU > wellknown.MaxMTU) {
		return fmt.Errorf("%s.mtu %d is invalid: must be %d-%d", field, i.MTU, wellknown.MinMTU, wellknown.MaxMTU)
	}
	if i.Queues != 0 && (i.Queues < MinQueues || i.Queues > MaxQueues) {
		return fmt.Errorf("%s.queues %d is invalid: must be %d-%d", field, i.Queues, MinQueues, MaxQueues)
	}
	for _, q := range []struct {
		name string
		v    int32
	}{{"rxQueueSize", i.RxQueueSize}, {"txQueueSize", i.TxQueueSize}} {
		if q.v != 0 && !slices.Contains(QueueSizes, q.v) {
			return fmt.Errorf("%s.%s %d is invalid: must be one of %s", field, q.name, q.v, joinInts(QueueSizes))
		}
	}
	for _, row := range wellknown.Offloads {
		if v := *i.Offloads.Offload(row.Name); v != "" && v != v1alpha1.OffloadOn && v != v1alpha1.OffloadOff {
			return fmt.Errorf("%s.offloads.%s %q is invalid: must be On or Off", field, row.Name, v)
		}
	}
	return nil
}

// Marshal validates a and returns its JSON, the annotation value. The output
// is deterministic: equal values give equal strings.
func (a Annotation) Marshal() (string, error) {
	if err := a.Validate(); err != nil {
		return "", fmt.Errorf("failed to marshal tuning annotation: %w", err)
	}
	if a.Interfaces == nil {
		a.Interfaces = map[string]Interface{}
	}
	data, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("failed to marshal tuning annotation: %w", err)
	}
	return string(data), nil
}

// Parse decodes and validates an annotation value. Unknown keys are ignored
// (forward compatibility); a malformed document or an out-of-range value is an
// error naming the field.
func Parse(value string) (Annotation, error) {
	var a Annotation
	if err := json.Unmarshal([]byte(value), &a); err != nil {
		return Annotation{}, fmt.Errorf("failed to parse tuning annotation %s: %w", AnnotationKey, err)
	}
	if err := a.Validate(); err != nil {
		return Annotation{}, fmt.Errorf("failed to validate tuning annotation %s: %w", AnnotationKey, err)
	}
	return a, nil
}

func joinInts(v []int32) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// Diff names the fields in which running differs from i, as
// "mtu 1500, running 9000; tso On, running Off" (i's value first, then
// running's), or "" when they are equal. Every field of Interface counts.
//
// An offload left unset ("") on either side counts as On: the domain hook
// then leaves the libvirt attribute out, and QEMU's virtio-net properties
// default to on, as the API defaults every offload to On. So a VMI that
// started before an offload existed (its annotation lacks the key) does not
// differ from a template that now sets it On, and an upgrade that adds an
// offload to wellknown.Offloads makes no running VM RestartRequired.
func (i Interface) Diff(running Interface) string {
	on := v1alpha1.AllOffloads(v1alpha1.OffloadOn)
	i.Offloads.FillFrom(on)
	running.Offloads.FillFrom(on)
	if i == running {
		return ""
	}
	var out []string
	add := func(field string, want, got any) {
		if want != got {
			out = append(out, fmt.Sprintf("%s %v, running %v", field, want, got))
		}
	}
	add("mtu", i.MTU, running.MTU)
	add("queues", i.Queues, running.Queues)
	add("rxQueueSize", i.RxQueueSize, running.RxQueueSize)
	add("txQueueSize", i.TxQueueSize, running.TxQueueSize)
	for _, row := range wellknown.Offloads {
		add(row.Name, *i.Offloads.Offload(row.Name), *running.Offloads.Offload(row.Name))
	}
	if len(out) == 0 { // a field this list does not name yet
		return fmt.Sprintf("%+v, running %+v", i, running)
	}
	return strings.Join(out, "; ")
}

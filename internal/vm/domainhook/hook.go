package domainhook

import (
	"encoding/json"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// HookName is the hook point this package implements and the executable name
// the sidecar-shim runs for it (cmd/sidecars/sidecar_shim.go onDefineDomainBin).
const HookName = "onDefineDomain"

// Result is what OnDefineDomain and Apply return.
type Result struct {
	// Domain is the domain XML to print on stdout: the input bytes unchanged
	// when nothing was changed, otherwise the edited document.
	Domain []byte
	// Changes lists every attribute the hook set, in document order.
	Changes []Change
	// Warnings are findings that did not stop the edit (values capped, tuning
	// without a matching interface, offload combinations the guest ignores).
	Warnings []string
}

// Changed reports whether the domain differs from the input.
func (r Result) Changed() bool { return len(r.Changes) > 0 }

// Change is one attribute the hook set.
type Change struct {
	// Network is the VM network name the tuning is keyed by (alias "ua-<Network>").
	Network string
	// Element is the path of the element below <interface>: "driver",
	// "driver/host", "driver/guest" or "mtu".
	Element string
	// Attr is the attribute name, e.g. "rx_queue_size".
	Attr string
	// From is the previous value, "" when the attribute was absent.
	From string
	// To is the new value.
	To string
}

// OnDefineDomain runs the hook: it reads the fastpath.io/tuning annotation from
// the VMI (JSON, as the sidecar-shim passes it with --vmi) and applies it to
// domainXML (--domain). A VMI without the annotation, or a tuning that names
// no interface of the domain, gives the domain back byte for byte. Errors: a
// VMI that is not JSON, an annotation that domaintuning.Parse rejects, and every
// error of Apply.
//
// A VMI with the annotation fastpath.io/vsock-mode "Sibling" then gets the
// vhost-user vsock device of ApplySibling on SiblingSocket(namespace, name).
func OnDefineDomain(vmiJSON, domainXML []byte) (Result, error) {
	a, found, err := TuningFromVMI(vmiJSON)
	if err != nil {
		return Result{}, err
	}
	res := Result{Domain: domainXML}
	if found {
		if res, err = Apply(domainXML, a); err != nil {
			return Result{}, err
		}
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := json.Unmarshal(vmiJSON, &vmi); err != nil {
		return Result{}, fmt.Errorf("failed to decode VMI JSON: %w", err)
	}
	switch mode := vmi.Annotations[v1alpha1.VSOCKModeAnnotation]; mode {
	case "", string(v1alpha1.VSOCKModeRelay):
		return res, nil
	case string(v1alpha1.VSOCKModeSibling):
		sib, err := ApplySibling(res.Domain, SiblingSocket(vmi.Namespace, vmi.Name))
		if err != nil {
			return Result{}, err
		}
		res.Domain = sib.Domain
		res.Changes = append(res.Changes, sib.Changes...)
		return res, nil
	default:
		return Result{}, fmt.Errorf("failed to read annotation %s of VMI %s/%s: %q is invalid: must be Relay or Sibling",
			v1alpha1.VSOCKModeAnnotation, vmi.Namespace, vmi.Name, mode)
	}
}

// TuningFromVMI decodes a VirtualMachineInstance (JSON) and parses its
// fastpath.io/tuning annotation. found is false when the annotation is absent.
// Input that is not a JSON object (e.g. `null`) is an error. The error of a
// bad annotation names the field and its allowed values, e.g.
// `interfaces["fp-a"].rxQueueSize 300 is invalid: must be one of 256, 512, 1024`,
// or the unknown key and where it is, e.g. `interfaces["fp-a"] has unknown
// key "rxqueuesize"`.
func TuningFromVMI(vmiJSON []byte) (a domaintuning.Annotation, found bool, err error) {
	if err := checkVMIObject(vmiJSON); err != nil {
		return domaintuning.Annotation{}, false, err
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := json.Unmarshal(vmiJSON, &vmi); err != nil {
		return domaintuning.Annotation{}, false, fmt.Errorf("failed to decode VMI JSON: %w", err)
	}
	value, ok := vmi.Annotations[domaintuning.AnnotationKey]
	if !ok {
		return domaintuning.Annotation{}, false, nil
	}
	err = checkAnnotationKeys(value)
	if err == nil {
		a, err = domaintuning.Parse(value)
	}
	if err != nil {
		return domaintuning.Annotation{}, true, fmt.Errorf("failed to read annotation %s of VMI %s/%s: %w",
			domaintuning.AnnotationKey, vmi.Namespace, vmi.Name, err)
	}
	return a, true, nil
}

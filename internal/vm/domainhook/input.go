package domainhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fastpath-io/fastpath/internal/vm/domaintuning"
)

// checkVMIObject refuses VMI input that is not a JSON object: encoding/json
// decodes `null` (and nothing else but an object) into an empty VMI without
// an error, which would let the hook pass a domain through untuned while
// the sidecar-shim handed it no VMI at all.
func checkVMIObject(vmiJSON []byte) error {
	trimmed := bytes.TrimSpace(vmiJSON)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		kind := "nothing"
		if len(trimmed) > 0 {
			kind = string(trimmed[:min(len(trimmed), 16)])
		}
		return fmt.Errorf("failed to decode VMI JSON: must be a JSON object (a VirtualMachineInstance), got %s", kind)
	}
	return nil
}

// annotationKeys are the case-sensitive keys of the tuning annotation's
// objects: the top level, each interfaces[...] value and its offloads.
var annotationKeys = struct{ top, iface, offloads []string }{
	top:      jsonKeys(reflect.TypeFor[domaintuning.Annotation]()),
	iface:    jsonKeys(reflect.TypeFor[domaintuning.Interface]()),
	offloads: jsonKeys(reflect.TypeFor[domaintuning.Offloads]()),
}

func jsonKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// checkAnnotationKeys refuses keys of the tuning annotation value that
// domaintuning.Annotation does not have (encoding/json would ignore them, and
// match a key spelt in another case), naming where the key is, e.g.
// `interfaces["fp-a"] has unknown key "rxqueuesize": allowed keys are mtu,
// queues, rxQueueSize, txQueueSize, offloads (case-sensitive)`. Values of
// the wrong type are left to domaintuning.Parse.
func checkAnnotationKeys(value string) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &top); err != nil || top == nil {
		return nil // domaintuning.Parse names what is wrong
	}
	if err := unknownKeys("the annotation", top, annotationKeys.top); err != nil {
		return err
	}
	var ifaces map[string]map[string]json.RawMessage
	if json.Unmarshal(top["interfaces"], &ifaces) != nil {
		return nil
	}
	names := make([]string, 0, len(ifaces))
	for n := range ifaces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		where := "interfaces[" + strconv.Quote(n) + "]"
		if err := unknownKeys(where, ifaces[n], annotationKeys.iface); err != nil {
			return err
		}
		var off map[string]json.RawMessage
		if raw, ok := ifaces[n]["offloads"]; ok && json.Unmarshal(raw, &off) == nil {
			if err := unknownKeys(where+".offloads", off, annotationKeys.offloads); err != nil {
				return err
			}
		}
	}
	return nil
}

func unknownKeys(where string, obj map[string]json.RawMessage, allowed []string) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("%s has unknown key %q: allowed keys are %s (case-sensitive)", where, k, strings.Join(allowed, ", "))
		}
	}
	return nil
}

package netconf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// MaxNetConfBytes is the largest network configuration LoadNetConf (and the
// plugin's stdin) accepts, in bytes: 1 MiB. A netconf the operator renders is
// under 1 KiB; the largest legitimate input is a CNI 1.1 GC request whose
// cni.dev/valid-attachments lists every attachment of the node (about 100
// bytes each, so ten thousand fit). Anything larger is refused before it is
// stored in a state file.
const MaxNetConfBytes = 1 << 20

// objectKeys are the case-sensitive keys of the JSON objects the plugin
// decodes into Go structs, by path ("" is the top level). encoding/json
// matches keys case-insensitively; checkKeys refuses a key that matches one
// of these only when case is ignored (e.g. "TSO" for "tso").
var objectKeys = map[string][]string{
	"":              jsonKeys(reflect.TypeFor[NetConf]()),
	"offloads":      jsonKeys(reflect.TypeFor[Offloads]()),
	"ovs":           jsonKeys(reflect.TypeFor[OVS]()),
	"runtimeConfig": jsonKeys(reflect.TypeFor[RuntimeConfig]()),
}

// jsonKeys returns the JSON names of the fields of struct type t.
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

// checkKeys walks the JSON document data and refuses, with the path of the
// object named, (1) a key that occurs twice in one object (encoding/json
// would silently keep the last) and (2) a key of an object in objectKeys
// that equals one of its keys only when case is ignored. data must be
// syntactically valid JSON (json.Unmarshal has accepted it).
func checkKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return walkValue(dec, "")
}

// walkValue consumes one JSON value from dec; path is where it sits, e.g.
// "offloads" or "ipam.ranges[0]".
func walkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("failed to parse network configuration at %q: %w", path, err)
	}
	switch tok {
	case json.Delim('{'):
		return walkObject(dec, path)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}

func walkObject(dec *json.Decoder, path string) error {
	known, checked := objectKeys[path]
	seen := map[string]bool{}
	where := path
	if where == "" {
		where = "network configuration"
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("failed to parse network configuration at %q: %w", path, err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return invalid("%s has key %q twice: every key may occur once", where, key)
		}
		seen[key] = true
		if checked && !slices.Contains(known, key) {
			for _, k := range known {
				if strings.EqualFold(k, key) {
					return invalid("%s has unknown key %q: keys are case-sensitive, the key is %q", where, key, k)
				}
			}
		}
		child := key
		if path != "" {
			child = path + "." + key
		}
		if err := walkValue(dec, child); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

// readLimited reads at most MaxNetConfBytes from r; more is an error naming
// the limit.
func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxNetConfBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxNetConfBytes {
		return nil, tooLarge()
	}
	return data, nil
}

func tooLarge() error {
	return invalid("network configuration is larger than %d bytes (netconf.MaxNetConfBytes): refused", MaxNetConfBytes)
}

// ReadStdin reads a plugin's stdin for Preflight: at most MaxNetConfBytes;
// more is a *types.Error with code ErrInvalidNetworkConfig naming the limit.
func ReadStdin(r io.Reader) ([]byte, error) { return readLimited(r) }

// Preflight checks what the CNI library (skel) would otherwise check first
// with a less helpful message: a configuration larger than MaxNetConfBytes,
// and a missing or empty cniVersion (skel takes it for "0.1.0" and reports
// "incompatible CNI versions"). Malformed JSON passes: LoadNetConf reports
// it. The error is a *types.Error with code ErrInvalidNetworkConfig.
func Preflight(stdin []byte) error {
	if len(stdin) > MaxNetConfBytes {
		return tooLarge()
	}
	var v struct {
		CNIVersion *json.RawMessage `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &v); err != nil {
		return nil // LoadNetConf names what is wrong
	}
	if v.CNIVersion == nil || string(*v.CNIVersion) == `""` || string(*v.CNIVersion) == "null" {
		return invalid("cniVersion is required: must be one of %s", strings.Join(SupportedVersions, ", "))
	}
	return nil
}

// PeekDatapath returns the "datapath" of the network configuration stdin
// as written ("" when absent, not a string, or stdin is not a JSON object):
// what the plugin binary reads to decide, before anything else, whether it
// hands the invocation over to the OVS plugin. LoadNetConf validates it.
func PeekDatapath(stdin []byte) string {
	var v struct {
		Datapath json.RawMessage `json:"datapath"`
	}
	if json.Unmarshal(stdin, &v) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(v.Datapath, &s) != nil {
		return ""
	}
	return s
}

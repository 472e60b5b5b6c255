package sysctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// SocketBuffer is the VMCI paper's socket buffer size in bytes (256 KB, "best
// at 4 KB-64 KB messages with 256 KB socket buffers"; docs/design.md §1).
const SocketBuffer = 256 << 10

// Setting is one sysctl and the minimum the tuning wants for each of its
// whitespace-separated fields.
type Setting struct {
	// Name in dotted form, e.g. net.core.rmem_max.
	Name string
	// Min holds one minimum per field, in the sysctl's unit (bytes for these).
	Min []int64
}

// VMCI is the tuning for 256 KB socket buffers:
//   - net.core.rmem_max / wmem_max cap what setsockopt(SO_RCVBUF/SO_SNDBUF)
//     may ask for; the kernel default (212992 bytes on Linux) is below 256 KB,
//     so netperf -s/-S 256K would be silently clamped.
//   - net.ipv4.tcp_rmem / tcp_wmem are "min default max" triples for TCP's
//     automatic buffer sizing: the default (initial) size and the max are raised
//     to 256 KB; the min is left at the kernel's 4096 (one page).
var VMCI = []Setting{
	{Name: "net.core.rmem_max", Min: []int64{SocketBuffer}},
	{Name: "net.core.wmem_max", Min: []int64{SocketBuffer}},
	{Name: "net.ipv4.tcp_rmem", Min: []int64{4096, SocketBuffer, SocketBuffer}},
	{Name: "net.ipv4.tcp_wmem", Min: []int64{4096, SocketBuffer, SocketBuffer}},
}

// Tuner checks and (with Apply) raises sysctls.
type Tuner struct {
	// Root is the sysctl directory; empty means /proc/sys.
	Root string
	// Settings to check; nil means VMCI.
	Settings []Setting
	// Apply writes the values that are below the minimum; false only reads.
	Apply bool
	// Log receives a line for every value written.
	Log logr.Logger
}

// Ensure reads every setting and, with Apply, raises each field below its
// minimum to the minimum, keeping the fields that are higher (so a value an
// admin set higher is never lowered). It returns one status per setting, in
// Settings order: Value is the value in force afterwards (fields joined by
// one space), and Applied is true when Apply is set and the value in force
// meets the tuning (written now, by an earlier run of the agent, or already
// so). Settings that cannot be read, parsed or written are reported with what
// was read and joined into the error; the others are still handled.
func (t *Tuner) Ensure() ([]fastpathv1alpha1.SysctlStatus, error) {
	settings := t.Settings
	if settings == nil {
		settings = VMCI
	}
	out := make([]fastpathv1alpha1.SysctlStatus, 0, len(settings))
	var errs []error
	for _, s := range settings {
		st, err := t.ensure(s)
		out = append(out, st)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func (t *Tuner) path(name string) string {
	root := t.Root
	if root == "" {
		root = "/proc/sys"
	}
	return filepath.Join(root, strings.ReplaceAll(name, ".", "/"))
}

func (t *Tuner) ensure(s Setting) (fastpathv1alpha1.SysctlStatus, error) {
	st := fastpathv1alpha1.SysctlStatus{Name: s.Name}
	path := t.path(s.Name)
	raw, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("failed to read sysctl %s: %w", s.Name, err)
	}
	fields := strings.Fields(string(raw))
	st.Value = strings.Join(fields, " ")
	cur, err := parse(fields)
	if err != nil {
		return st, fmt.Errorf("failed to parse sysctl %s value %q: %w", s.Name, st.Value, err)
	}
	if len(cur) != len(s.Min) {
		return st, fmt.Errorf("failed to parse sysctl %s value %q: %d fields, want %d", s.Name, st.Value, len(cur), len(s.Min))
	}
	want := raise(cur, s.Min)
	if !t.Apply {
		return st, nil
	}
	if wantStr := join(want); wantStr != st.Value {
		if err := os.WriteFile(path, []byte(wantStr+"\n"), 0o644); err != nil {
			return st, fmt.Errorf("failed to write sysctl %s = %q: %w", s.Name, wantStr, err)
		}
		t.Log.Info("Raised sysctl", "name", s.Name, "from", st.Value, "to", wantStr)
		st.Value = wantStr
	}
	st.Applied = true
	return st, nil
}

func parse(fields []string) ([]int64, error) {
	out := make([]int64, len(fields))
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// raise returns cur with every field below min raised to min.
func raise(cur, min []int64) []int64 {
	out := make([]int64, len(cur))
	for i := range cur {
		out[i] = max(cur[i], min[i])
	}
	return out
}

func join(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, " ")
}

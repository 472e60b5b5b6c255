package benchfig

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// EnvDir names the environment variable that holds the directory figures are
// written to. `make bench` sets it to the absolute path of _out/bench.
const EnvDir = "FASTPATH_BENCH_DIR"

// Figure is one measured number with its unit (e.g. "ms", "Mbps", "ratio").
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Target is one target a benchmark judged, e.g. the CNI ADD p50 ratio of
// fastpath to the reference bridge plugin.
type Target struct {
	// Kind is "throughput" (higher is better, Op ">=") or "latency" (lower
	// is better, Op "<=").
	Kind string `json:"kind"`
	// Name is what is compared, e.g. "cni-add-p50 fastpath/bridge-reference".
	Name string `json:"name"`
	// Value is the measured figure (a ratio: the median of paired
	// per-repetition ratios); Goal the bound it must meet.
	Value float64 `json:"value"`
	Goal  float64 `json:"goal"`
	// Detail says how Value was measured (repetitions, min-max, medians).
	Detail string `json:"detail,omitempty"`
}

// Op is ">=" for throughput targets and "<=" for latency targets.
func (t Target) Op() string {
	if t.Kind == "latency" {
		return "<="
	}
	return ">="
}

// Pass reports whether Value meets Goal.
func (t Target) Pass() bool {
	if t.Kind == "latency" {
		return t.Value <= t.Goal
	}
	return t.Value >= t.Goal
}

// String renders the target the way `make bench` prints targets (after
// "target "): "PASS|FAIL <kind> <name> <value> <op> <goal> (<detail>)".
func (t Target) String() string {
	verdict := "FAIL"
	if t.Pass() {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s %s %s %.2f %s %.2f (%s)", verdict, t.Kind, t.Name, t.Value, t.Op(), t.Goal, t.Detail)
}

// File is the content of one <benchmark>.json figures file.
type File struct {
	Benchmark   string   `json:"benchmark"`
	Description string   `json:"description,omitempty"`
	Figures     []Figure `json:"figures"`
	// Targets the benchmark judged; `fastpath-bench local` prints them as
	// "target ..." lines beside its own.
	Targets []Target `json:"targets,omitempty"`
}

// PairedRatios returns a[i]/b[i] for every i both have (a and b are the
// per-repetition figures of two configurations measured alternately), and
// their median, min and max; all 0 when there is no pair.
func PairedRatios(a, b []float64) (ratios []float64, median, lo, hi float64) {
	for i := range min(len(a), len(b)) {
		if b[i] != 0 {
			ratios = append(ratios, a[i]/b[i])
		}
	}
	if len(ratios) == 0 {
		return nil, 0, 0, 0
	}
	s := append([]float64(nil), ratios...)
	sort.Float64s(s)
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return ratios, median, s[0], s[n-1]
}

// Write stores f as $FASTPATH_BENCH_DIR/<f.Benchmark>.json. It does nothing
// and returns "" when FASTPATH_BENCH_DIR is unset, so a benchmark run by hand
// with `go test -bench` writes no files. It returns the path written.
func Write(f File) (string, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		return "", nil
	}
	if f.Benchmark == "" || strings.ContainsAny(f.Benchmark, `/\`) {
		return "", fmt.Errorf("failed to write figures: benchmark name %q must be a non-empty file name", f.Benchmark)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("failed to create figures directory %s: %w", dir, err)
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return "", fmt.Errorf("failed to encode figures %s: %w", f.Benchmark, err)
	}
	path := filepath.Join(dir, f.Benchmark+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("failed to write figures %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("failed to rename figures file %s: %w", tmp, err)
	}
	return path, nil
}

// ReadDir loads every *.json figures file in dir, sorted by benchmark name.
// Files that are not figures files (no "benchmark" key) are skipped; a
// missing dir yields no files and no error.
func ReadDir(dir string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("failed to list figures in %s: %w", dir, err)
	}
	var out []File
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("failed to read figures %s: %w", p, err)
		}
		var f File
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("failed to decode figures %s: %w", p, err)
		}
		if f.Benchmark == "" {
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Benchmark < out[j].Benchmark })
	return out, nil
}

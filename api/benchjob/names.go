package benchjob

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Labels and annotations on every object rendered here.
const (
	// LabelBenchmark is set to LabelValue(<benchmark name>) on every child.
	LabelBenchmark = "fastpath.io/benchmark"
	// LabelGeneration is the benchmark metadata.generation a Job or pod runs for:
	// children of an older generation are deleted when the spec changes.
	LabelGeneration = "fastpath.io/generation"
	// LabelPath is the path a netserver pod serves: PathFastPath or PathBaseline.
	LabelPath = "fastpath.io/path"
	// LabelPair is the pair (from 1) a netserver pod serves.
	LabelPair = "fastpath.io/pair"

	labelName      = "app.kubernetes.io/name"
	labelComponent = "app.kubernetes.io/component"
	labelManagedBy = "app.kubernetes.io/managed-by"

	// ComponentRunner, ComponentNetserver and ComponentResults are the
	// app.kubernetes.io/component values.
	ComponentRunner    = "runner"
	ComponentNetserver = "netserver"
	ComponentResults   = "results"

	// RunnerContainer is the name of the runner Job's one container.
	RunnerContainer = "runner"
)

// Kubernetes name limits: DNS subdomain names (most objects) and label values
// (a Job's name becomes the job-name label of its pods, so it must fit a label
// value too). Source: k8s.io/apimachinery/pkg/util/validation.
const (
	maxSubdomain  = 253
	maxLabelValue = 63
)

// ResultsConfigMapName is "<benchmark>-results", the ConfigMap that receives
// results.json.
func ResultsConfigMapName(benchmark string) string {
	return childName(benchmark, "-results", maxSubdomain)
}

// RunnerName is "<benchmark>-runner", the name of the runner's ServiceAccount,
// Role and RoleBinding.
func RunnerName(benchmark string) string {
	return childName(benchmark, "-runner", maxSubdomain)
}

// JobName is "<benchmark>-run-<generation>", at most 63 characters.
func JobName(benchmark string, generation int64) string {
	return childName(benchmark, "-run-"+strconv.FormatInt(generation, 10), maxLabelValue)
}

// ServerPodName is "<benchmark>-netserver-<path>-<pair>" (pair from 1).
func ServerPodName(benchmark, path string, pair int) string {
	return childName(benchmark, "-netserver-"+path+"-"+strconv.Itoa(pair), maxSubdomain)
}

// LabelValue is name if it fits a label value (63 characters), else a
// truncated name with a hash of the whole name, so different long names stay
// different.
func LabelValue(name string) string { return childName(name, "", maxLabelValue) }

// childName returns base+suffix when it fits max characters, else base cut
// short, "-", eight hex digits of sha256(base) and suffix. The cut drops
// trailing '-' and '.' so the result stays a valid DNS subdomain.
func childName(base, suffix string, max int) string {
	if len(base)+len(suffix) <= max {
		return base + suffix
	}
	sum := sha256.Sum256([]byte(base))
	h := hex.EncodeToString(sum[:])[:8]
	cut := strings.TrimRight(base[:max-len(suffix)-len(h)-1], "-.")
	return cut + "-" + h + suffix
}

// Labels returns the labels of a child of benchmark with the given component.
func Labels(benchmark, component string) map[string]string {
	return map[string]string{
		labelName:      "fastpath-bench",
		labelComponent: component,
		labelManagedBy: "fastpath-operator",
		LabelBenchmark: LabelValue(benchmark),
	}
}

package jobrunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fastpath-io/fastpath/api/benchjob"
	"github.com/fastpath-io/fastpath/api/benchjob/results"
	"github.com/fastpath-io/fastpath/bench/netperf"
)

// MaxConfigMapBytes is the most a ConfigMap's data may hold, counting keys
// and values: 1 MiB, the limit Kubernetes' API validation enforces
// (ValidateConfigMap: "must have at most 1048576 bytes").
const MaxConfigMapBytes = 1 << 20

// FieldManager is the field manager of the runner's ConfigMap writes.
const FieldManager = "fastpath-bench"

// ErrorReason maps a runner error to the errorReason the controller reads
// (ErrorReason*): NetserverUnreachable when netperf could not open
// its control connection or resolve the server (netperf.ErrNetserverUnreachable,
// netperf.ErrHostUnresolvable), RunnerFailed for everything else.
func ErrorReason(err error) string {
	if errors.Is(err, netperf.ErrNetserverUnreachable) || errors.Is(err, netperf.ErrHostUnresolvable) {
		return benchjob.ErrorReasonNetserverUnreachable
	}
	return benchjob.ErrorReasonRunnerFailed
}

// OutcomeData returns the ConfigMap data of one outcome, as the contract
// (contract.go) describes it: runID plus results.json (doc encoded, when
// runErr is nil) or error and errorReason (when it is not). Keys of the other
// outcome map to nil, so that a JSON merge patch of {"data": ...} removes
// what an earlier attempt left. When doc does not fit MaxConfigMapBytes its
// samples lose perSession; when it still does not fit, the outcome becomes
// a RunnerFailed error saying so.
func OutcomeData(runID string, doc results.Document, runErr error) (map[string]*string, error) {
	str := func(s string) *string { return &s }
	fail := func(err error) map[string]*string {
		// One line: the controller shows it in a condition message.
		msg := strings.Join(strings.Fields(err.Error()), " ")
		return map[string]*string{benchjob.RunIDKey: str(runID), benchjob.ErrorKey: str(msg), benchjob.ErrorReasonKey: str(ErrorReason(err)), benchjob.ResultsKey: nil}
	}
	if runErr != nil {
		return fail(runErr), nil
	}
	for _, trim := range []bool{false, true} {
		d := doc
		if trim {
			d = withoutSessions(doc)
		}
		var buf bytes.Buffer
		if err := results.Encode(&buf, d); err != nil {
			return nil, err
		}
		data := map[string]*string{benchjob.RunIDKey: str(runID), benchjob.ResultsKey: str(buf.String()), benchjob.ErrorKey: nil, benchjob.ErrorReasonKey: nil}
		if size(data) <= MaxConfigMapBytes {
			return data, nil
		}
	}
	return fail(fmt.Errorf("failed to store the results in a ConfigMap: the document is larger than %d bytes even without samples[].perSession; run fewer points or repetitions", MaxConfigMapBytes)), nil
}

func size(data map[string]*string) int {
	n := 0
	for k, v := range data {
		if v != nil {
			n += len(k) + len(*v)
		}
	}
	return n
}

// withoutSessions returns a copy of doc whose samples have no perSession.
func withoutSessions(doc results.Document) results.Document {
	out := doc
	out.Runs = make([]results.Run, len(doc.Runs))
	for i, r := range doc.Runs {
		r.Samples = append([]results.Sample(nil), r.Samples...)
		for j := range r.Samples {
			r.Samples[j].PerSession = nil
		}
		out.Runs[i] = r
	}
	return out
}

// ConfigMapSink writes a runner's outcome into the results ConfigMap the
// FastPathBenchmark controller created (ResultsConfigMapName).
type ConfigMapSink struct {
	// Client reaches the API server; the runner's ServiceAccount may patch
	// this one ConfigMap only.
	Client corev1client.ConfigMapsGetter
	// Namespace and Name of the ConfigMap.
	Namespace, Name string
	// RunID is echoed as runID (--run-id, the Job name).
	RunID string
	// Backoff paces retries of transient API errors; the zero value means
	// DefaultSinkBackoff.
	Backoff wait.Backoff
}

// DefaultSinkBackoff retries a failed write 5 times over about 30 s: enough
// for an API server that restarts, short against the Job's deadline.
var DefaultSinkBackoff = wait.Backoff{Steps: 6, Duration: time.Second, Factor: 2, Jitter: 0.1}

// Write stores the outcome (OutcomeData) with ONE JSON merge patch of .data,
// retried on transient errors. A missing ConfigMap, a forbidden or invalid
// request is not retried. It returns the data written (nil on error).
func (s ConfigMapSink) Write(ctx context.Context, doc results.Document, runErr error) (map[string]*string, error) {
	data, err := OutcomeData(s.RunID, doc, runErr)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return nil, fmt.Errorf("failed to encode the patch of ConfigMap %s/%s: %w", s.Namespace, s.Name, err)
	}
	backoff := s.Backoff
	if backoff.Steps == 0 {
		backoff = DefaultSinkBackoff
	}
	permanent := func(err error) bool {
		return apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) ||
			apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err) || ctx.Err() != nil
	}
	err = retry.OnError(backoff, func(err error) bool { return !permanent(err) }, func() error {
		_, err := s.Client.ConfigMaps(s.Namespace).Patch(ctx, s.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to write the outcome of run %s to ConfigMap %s/%s: %w", s.RunID, s.Namespace, s.Name, err)
	}
	return data, nil
}

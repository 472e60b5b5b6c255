package benchjob

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fastpath-io/fastpath/api/benchjob/results"
	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

// RunnerError is a failure the runner reported in the results ConfigMap:
// ErrorReasonKey (Reason) and ErrorKey (Message).
type RunnerError struct {
	Reason, Message string
}

func (e *RunnerError) Error() string {
	return fmt.Sprintf("the runner failed (%s): %s", e.Reason, e.Message)
}

// ErrNoOutcome means the results ConfigMap holds neither ResultsKey nor
// ErrorKey: the runner has not written (yet), or wrote nothing usable.
var ErrNoOutcome = errors.New("no outcome in the results ConfigMap")

// ReadOutcome reads the outcome a runner wrote into the data of its results
// ConfigMap (the protocol in contract.go; the writer is ConfigMapSink). It
// returns the decoded and validated document on success; a *RunnerError
// when the runner wrote error or errorReason; ErrNoOutcome when there is
// neither results.json nor an error; and results.Decode's error when
// results.json does not decode or validate. The caller compares
// data[RunIDKey] with the run it started.
func ReadOutcome(data map[string]string) (results.Document, error) {
	if data[ErrorKey] != "" || data[ErrorReasonKey] != "" {
		return results.Document{}, &RunnerError{Reason: data[ErrorReasonKey], Message: data[ErrorKey]}
	}
	if data[ResultsKey] == "" {
		return results.Document{}, ErrNoOutcome
	}
	return results.Decode(strings.NewReader(data[ResultsKey]))
}

// ReadResults gets the results ConfigMap of b (status.resultsConfigMap, else
// ResultsConfigMapName) and reads its outcome (ReadOutcome). Errors name the
// ConfigMap; a runner failure is a *RunnerError.
func ReadResults(ctx context.Context, c client.Reader, b *fastpathv1alpha1.FastPathBenchmark) (results.Document, error) {
	name := b.Status.ResultsConfigMap
	if name == "" {
		name = ResultsConfigMapName(b.Name)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: name}, cm); err != nil {
		return results.Document{}, fmt.Errorf("failed to get results ConfigMap %s/%s: %w", b.Namespace, name, err)
	}
	doc, err := ReadOutcome(cm.Data)
	if errors.Is(err, ErrNoOutcome) {
		return results.Document{}, fmt.Errorf("ConfigMap %s/%s has no %s", b.Namespace, name, ResultsKey)
	}
	return doc, err
}

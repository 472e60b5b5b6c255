package gate_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fastpathv1alpha1 "github.com/fastpath-io/fastpath/api/v1alpha1"
)

func ptr[T any](v T) *T { return &v }

// cond is a benchmark condition.
func cond(t string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg}
}

// bench is FastPathBenchmark apps/ci of generation gen whose status is of
// generation observed, in phase with conds.
func bench(gen, observed int64, phase fastpathv1alpha1.BenchmarkPhase, conds ...metav1.Condition) *fastpathv1alpha1.FastPathBenchmark {
	return &fastpathv1alpha1.FastPathBenchmark{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ci", Generation: gen, UID: "uid-1"},
		Spec: fastpathv1alpha1.FastPathBenchmarkSpec{
			AttachmentRef: fastpathv1alpha1.LocalObjectReference{Name: "db-link"}, Mode: fastpathv1alpha1.BenchmarkModePod,
			Tests: []fastpathv1alpha1.BenchmarkTest{fastpathv1alpha1.TestTCPStream}, SocketSizes: []int32{65536}, MessageSizes: []int32{65536},
			Sessions: []int32{1}, Duration: &metav1.Duration{Duration: 10 * time.Second}, Repetitions: ptr(int32(1)), Baseline: fastpathv1alpha1.BaselinePodNetwork,
		},
		Status: fastpathv1alpha1.FastPathBenchmarkStatus{ObservedGeneration: observed, Phase: phase, Conditions: conds},
	}
}

// The benchmark in each phase the controller writes (setPending,
// setRunning, setSucceeded, setFailed in controllers/benchmark).
func pending(reason, msg string) *fastpathv1alpha1.FastPathBenchmark {
	return bench(1, 1, fastpathv1alpha1.BenchmarkPending, cond(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, reason, msg))
}

func running(reason, msg string) *fastpathv1alpha1.FastPathBenchmark {
	return bench(1, 1, fastpathv1alpha1.BenchmarkRunning, cond(fastpathv1alpha1.RunningCondition, metav1.ConditionTrue, reason, msg))
}

func succeeded(msg string) *fastpathv1alpha1.FastPathBenchmark {
	r := fastpathv1alpha1.ReasonCriteriaMet
	return bench(1, 1, fastpathv1alpha1.BenchmarkSucceeded,
		cond(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, r, msg),
		cond(fastpathv1alpha1.SucceededCondition, metav1.ConditionTrue, r, msg),
		cond(fastpathv1alpha1.FailedCondition, metav1.ConditionFalse, r, msg))
}

func failed(reason, msg string) *fastpathv1alpha1.FastPathBenchmark {
	return bench(1, 1, fastpathv1alpha1.BenchmarkFailed,
		cond(fastpathv1alpha1.RunningCondition, metav1.ConditionFalse, reason, msg),
		cond(fastpathv1alpha1.SucceededCondition, metav1.ConditionFalse, reason, msg),
		cond(fastpathv1alpha1.FailedCondition, metav1.ConditionTrue, reason, msg))
}

// step is one answer of the scripted API to a Get of the benchmark.
type step struct {
	b   *fastpathv1alpha1.FastPathBenchmark
	err error
}

// script answers Gets as an API server would have at each read: the
// benchmark reads in turn get steps[0], steps[1], ... (the last repeats),
// the attachment exists when attachment(n) is true at the benchmark's nth
// read, and configMaps by name. It is the sequence of observations a test
// states, not a stand-in API server.
type script struct {
	client.Reader
	steps      []step
	attachment func(read int) bool
	configMaps map[string]*corev1.ConfigMap
	reads      int
}

func (s *script) Get(_ context.Context, key types.NamespacedName, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *fastpathv1alpha1.FastPathBenchmark:
		st := s.steps[min(s.reads, len(s.steps)-1)]
		s.reads++
		if st.err != nil {
			return st.err
		}
		*o = *st.b.DeepCopy()
		return nil
	case *fastpathv1alpha1.FastPathAttachment:
		if s.attachment != nil && s.attachment(s.reads) {
			o.Name, o.Namespace = key.Name, key.Namespace
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Group: "fastpath.io", Resource: "fastpathattachments"}, key.Name)
	case *corev1.ConfigMap:
		if cm, ok := s.configMaps[key.Name]; ok {
			*o = *cm.DeepCopy()
			return nil
		}
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	return fmt.Errorf("unexpected Get of %T", obj)
}

// stepClock advances by d on After(d) and fires at once: the follower's
// waits take no time, and the test sees each one.
type stepClock struct {
	now   time.Time
	waits []time.Duration
}

func newStepClock() *stepClock {
	return &stepClock{now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
}

func (c *stepClock) Now() time.Time { return c.now }

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.now = c.now.Add(d)
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

package attachment

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fastpath-io/fastpath/api/v1alpha1"
)

// Prometheus metrics, registered on controller-runtime's metrics.Registry
// (served on --metrics-bind-address).
var (
	// attachmentsByCondition counts attachments per condition type and status,
	// e.g. fastpath_attachments{condition="Ready",status="False"} 2.
	attachmentsByCondition = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_attachments",
		Help: "Number of FastPathAttachments by condition type and status (True, False, Unknown).",
	}, []string{"condition", "status"})
	// vmsWired is status.wiredVMs per attachment.
	vmsWired = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_attachment_vms_wired",
		Help: "Number of VirtualMachines whose template carries the attachment's wiring.",
	}, []string{"namespace", "name"})
	// vmsSelected is status.selectedVMs per attachment.
	vmsSelected = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fastpath_attachment_vms_selected",
		Help: "Number of VirtualMachines the attachment's vmSelector matches.",
	}, []string{"namespace", "name"})
	// vmPatches counts VM patches by result (success, conflict, error).
	vmPatches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fastpath_vm_patches_total",
		Help: "VirtualMachine template patches sent by the attachment reconciler, by result (success, conflict, error).",
	}, []string{"result"})
	// groupMoveSeconds is how long group moves (spec.eviction
	// MigrateTogether) took, from the start to the last VM's arrival: the
	// time the moving VMs' fast path was down.
	groupMoveSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fastpath_group_move_duration_seconds",
		Help:    "Duration of the group moves of MigrateTogether attachments, from the start to the last VM's arrival on the target node (their fast path is down meanwhile).",
		Buckets: []float64{5, 10, 20, 30, 60, 120, 300, 600, 1200},
	})
)

func init() {
	metrics.Registry.MustRegister(attachmentsByCondition, vmsWired, vmsSelected, vmPatches, groupMoveSeconds)
}

var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// metricsRecorder keeps each attachment's condition statuses so the
// per-condition counts can be recomputed when one attachment changes.
type metricsRecorder struct {
	mu    sync.Mutex
	conds map[types.NamespacedName]map[string]metav1.ConditionStatus
}

func newMetricsRecorder() *metricsRecorder {
	return &metricsRecorder{conds: map[types.NamespacedName]map[string]metav1.ConditionStatus{}}
}

func (m *metricsRecorder) observe(att *v1alpha1.FastPathAttachment) {
	key := types.NamespacedName{Namespace: att.Namespace, Name: att.Name}
	vmsWired.WithLabelValues(key.Namespace, key.Name).Set(float64(att.Status.WiredVMs))
	vmsSelected.WithLabelValues(key.Namespace, key.Name).Set(float64(att.Status.SelectedVMs))
	conds := map[string]metav1.ConditionStatus{}
	for _, c := range att.Status.Conditions {
		conds[c.Type] = c.Status
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conds[key] = conds
	m.publish()
}

func (m *metricsRecorder) forget(key types.NamespacedName) {
	vmsWired.DeleteLabelValues(key.Namespace, key.Name)
	vmsSelected.DeleteLabelValues(key.Namespace, key.Name)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conds, key)
	m.publish()
}

// publish recomputes attachmentsByCondition; the caller holds m.mu.
func (m *metricsRecorder) publish() {
	counts := map[string]map[metav1.ConditionStatus]int{}
	for _, conds := range m.conds {
		for t, st := range conds {
			if counts[t] == nil {
				counts[t] = map[metav1.ConditionStatus]int{}
			}
			counts[t][st]++
		}
	}
	for _, t := range append([]string{v1alpha1.ReadyCondition}, summarizedConditions...) {
		for _, st := range conditionStatuses {
			attachmentsByCondition.WithLabelValues(t, string(st)).Set(float64(counts[t][st]))
		}
	}
}

package relay

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names exported by the relay. Every metric but
// MetricBufferBytesLent has the labels "attachment" (namespace/name) and
// "service".
const (
	// MetricBytes counts payload bytes written to the far side, with label
	// "direction" = DirectionToTarget or DirectionToSource.
	MetricBytes = "fastpath_vsock_relay_bytes_total"
	// MetricConnectionsActive is the number of open relayed connections
	// (accepted and admitted, including those still dialing the target).
	MetricConnectionsActive = "fastpath_vsock_relay_connections_active"
	// MetricConnectionsTotal counts connections relayed to the target (the
	// target dial succeeded).
	MetricConnectionsTotal = "fastpath_vsock_relay_connections_total"
	// MetricDenials counts refused connections, with label "reason" (one of
	// the Reason constants).
	MetricDenials = "fastpath_vsock_relay_denials_total"
	// MetricBufferBytesLent is the bytes of copy buffers lent to busy
	// connections now (at most Options.BufferBudget); it has no labels.
	MetricBufferBytesLent = "fastpath_vsock_relay_buffer_bytes_lent"
)

// Directions of MetricBytes.
const (
	DirectionToTarget = "to_target"
	DirectionToSource = "to_source"
)

// Reasons of MetricDenials and of the denial log line.
const (
	// ReasonCIDNotAllowed: the source CID is not in the route's allow-list.
	ReasonCIDNotAllowed = "cid_not_allowed"
	// ReasonConnectionLimit: the route already has MaxConns connections.
	ReasonConnectionLimit = "connection_limit"
	// ReasonUnknownPeer: the transport did not report a source CID.
	ReasonUnknownPeer = "unknown_peer"
	// ReasonTargetUnreachable: dialing the target CID and port failed.
	ReasonTargetUnreachable = "target_unreachable"
	// ReasonGlobalLimit: the relay already has Options.MaxTotalConns connections.
	ReasonGlobalLimit = "global_limit"
	// ReasonNamespaceLimit: the routes of the route's namespace already
	// have Options.MaxConnsPerNamespace connections.
	ReasonNamespaceLimit = "namespace_limit"
	// ReasonCIDLimit: the source CID already has Options.MaxConnsPerCID
	// connections over all routes.
	ReasonCIDLimit = "cid_limit"
	// ReasonRevoked: an established connection closed by Update because the
	// route's new allow-list no longer admits its source CID or its target
	// changed.
	ReasonRevoked = "revoked"
)

type metrics struct {
	bytes   *prometheus.CounterVec
	active  *prometheus.GaugeVec
	total   *prometheus.CounterVec
	denials *prometheus.CounterVec
	lent    prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBytes,
			Help: "Payload bytes relayed, by route and direction (to_target: guest client to service VM; to_source: back).",
		}, []string{"attachment", "service", "direction"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricConnectionsActive,
			Help: "Open relayed connections by route.",
		}, []string{"attachment", "service"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricConnectionsTotal,
			Help: "Connections relayed to their target, by route.",
		}, []string{"attachment", "service"}),
		denials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDenials,
			Help: "Connections the relay refused, by route and reason.",
		}, []string{"attachment", "service", "reason"}),
		lent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: MetricBufferBytesLent,
			Help: "Bytes of copy buffers lent to busy relayed connections, bounded by the relay's buffer budget.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.bytes, m.active, m.total, m.denials, m.lent} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("failed to register vsock relay metrics: %w", err)
	}
	return m, nil
}

// routeMetrics are the metric children of one route, resolved once.
type routeMetrics struct {
	toTarget, toSource prometheus.Counter
	active             prometheus.Gauge
	total              prometheus.Counter
	denials            *prometheus.CounterVec // curried with the route labels
	labels             prometheus.Labels
}

func (m *metrics) forRoute(k routeKey) routeMetrics {
	att := k.attachment.String()
	l := prometheus.Labels{"attachment": att, "service": k.service}
	return routeMetrics{
		toTarget: m.bytes.WithLabelValues(att, k.service, DirectionToTarget),
		toSource: m.bytes.WithLabelValues(att, k.service, DirectionToSource),
		active:   m.active.WithLabelValues(att, k.service),
		total:    m.total.WithLabelValues(att, k.service),
		denials:  m.denials.MustCurryWith(l),
		labels:   l,
	}
}

// deleteRoute drops the series of a removed route so that routes of deleted
// attachments do not linger in the exposition.
func (m *metrics) deleteRoute(rm routeMetrics) {
	m.bytes.DeletePartialMatch(rm.labels)
	m.active.DeletePartialMatch(rm.labels)
	m.total.DeletePartialMatch(rm.labels)
	m.denials.DeletePartialMatch(rm.labels)
}

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Fleet metric names.
const (
	NameFleetErrors      = "aokeyd_fleet_errors_total"
	NameFleetLastPublish = "aokeyd_fleet_last_publish_timestamp_seconds"
)

// Fleet is the fleet publisher's series (fleet.Metrics).
type Fleet struct {
	errors      *prometheus.CounterVec
	lastPublish prometheus.Gauge
}

// NewFleet registers the fleet series on reg, with a zero series for each
// op in ops.
func NewFleet(reg prometheus.Registerer, ops []string) (*Fleet, error) {
	m := &Fleet{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameFleetErrors,
			Help: "Failed fleet operations through Vault by op (publish, status, read-revocations, apply-revocation); aokeyd goes on."}, []string{"op"}),
		lastPublish: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameFleetLastPublish,
			Help: "When this router's fleet status document was last published (Unix seconds)."}),
	}
	for _, c := range []prometheus.Collector{m.errors, m.lastPublish} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, op := range ops {
		m.errors.WithLabelValues(op)
	}
	return m, nil
}

// FleetFailed counts a failed fleet operation.
func (m *Fleet) FleetFailed(op string) { m.errors.WithLabelValues(op).Inc() }

// FleetPublished records a published status document.
func (m *Fleet) FleetPublished(at time.Time) { m.lastPublish.Set(float64(at.UnixNano()) / 1e9) }

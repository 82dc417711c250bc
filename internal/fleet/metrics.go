package fleet

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Op is what a fleet failure was doing (the op label).
type Op int

// Fleet operations.
const (
	OpPublish Op = iota + 1
	OpStatus
	OpReadRevocations
	OpApplyRevocation
)

var opNames = map[Op]string{OpPublish: "publish", OpStatus: "status", OpReadRevocations: "read-revocations", OpApplyRevocation: "apply-revocation"}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Metric names.
const (
	NameErrors      = "aokeyd_fleet_errors_total"
	NameLastPublish = "aokeyd_fleet_last_publish_timestamp_seconds"
)

// Metrics are the publisher's series.
type Metrics struct {
	errors      *prometheus.CounterVec
	lastPublish prometheus.Gauge
}

// NewMetrics registers the fleet series on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: NameErrors,
			Help: "Failed fleet operations through Vault (publish, status, read-revocations, apply-revocation); aokeyd goes on."}, []string{"op"}),
		lastPublish: prometheus.NewGauge(prometheus.GaugeOpts{Name: NameLastPublish,
			Help: "When the router's fleet status document was last published (Unix seconds)."}),
	}
	for _, c := range []prometheus.Collector{m.errors, m.lastPublish} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for op := range opNames {
		m.errors.WithLabelValues(op.String())
	}
	return m, nil
}

func (m *Metrics) failed(op Op)           { m.errors.WithLabelValues(op.String()).Inc() }
func (m *Metrics) published(at time.Time) { m.lastPublish.Set(float64(at.UnixNano()) / 1e9) }

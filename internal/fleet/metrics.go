package fleet

import (
	"fmt"
	"time"
)

// Op is what a fleet failure was doing (the op label of
// aokeyd_fleet_errors_total).
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

// Ops lists every Op (for a metric's label values).
func Ops() []Op { return []Op{OpPublish, OpStatus, OpReadRevocations, OpApplyRevocation} }

// Metrics records the publisher's outcomes (metrics.Fleet in aokeyd).
// Declared here, where it is used, so that aoctl, which shares this
// package, links no metrics client.
type Metrics interface {
	FleetFailed(op string)
	FleetPublished(at time.Time)
}

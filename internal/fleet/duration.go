package fleet

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a duration of a router's document as the fleet's documents
// in Vault have always spelled it: Go's duration text ("30s", "5m0s").
// Routers of every version read each other's documents, so this stays
// text, while aoctl's own --json output (control.Duration) gives
// durations in seconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler: Go's duration text.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler: Go's duration text.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

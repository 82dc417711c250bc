package lab

import "time"

// KeyLifetime is a send or accept lifetime as a key-source document has it
// (docs/keys.md): "always" when both ends are open, else a map with the
// ends that are set, in RFC 3339 UTC.
func KeyLifetime(start, end time.Time) any {
	if start.IsZero() && end.IsZero() {
		return "always"
	}
	m := map[string]string{}
	if !start.IsZero() {
		m["start"] = start.UTC().Format(time.RFC3339Nano)
	}
	if !end.IsZero() {
		m["end"] = end.UTC().Format(time.RFC3339Nano)
	}
	return m
}

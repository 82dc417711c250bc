package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"gopkg.in/yaml.v3"
)

// Day and Week are the extra duration units the policy accepts.
const (
	Day  = 24 * time.Hour
	Week = 7 * Day
)

// ParseDuration parses a non-negative duration such as "30d", "24h", "90s",
// "1w", "1d12h" or "1h30m". Units: w, d, h, m, s, ms, us, ns. A bare "0" is
// zero; any other number needs a unit.
func ParseDuration(s string) (time.Duration, error) {
	orig := s
	if s == "" {
		return 0, errors.New("empty duration")
	}
	if s == "0" {
		return 0, nil
	}
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
			i++
		}
		if i == 0 {
			return 0, fmt.Errorf("duration %s: expected a number at %s", keystore.Shown(orig), keystore.Shown(s))
		}
		num := s[:i]
		s = s[i:]
		j := 0
		for j < len(s) && (s[j] < '0' || s[j] > '9') && s[j] != '.' {
			j++
		}
		unit := s[:j]
		s = s[j:]
		var d time.Duration
		switch unit {
		case "":
			return 0, fmt.Errorf("duration %s: missing unit after %s (use w, d, h, m, s)", keystore.Shown(orig), num)
		case "d", "w":
			n, err := strconv.ParseUint(num, 10, 32)
			if err != nil {
				return 0, fmt.Errorf("duration %s: %s%s: want a whole number of %s", keystore.Shown(orig), num, unit, unitName(unit))
			}
			mul := Day
			if unit == "w" {
				mul = Week
			}
			if n > uint64(math.MaxInt64/int64(mul)) {
				return 0, fmt.Errorf("duration %s: too long", keystore.Shown(orig))
			}
			d = time.Duration(n) * mul
		case "h", "m", "s", "ms", "us", "µs", "ns":
			var err error
			d, err = time.ParseDuration(num + unit)
			if err != nil {
				return 0, fmt.Errorf("duration %s: %s%s: bad number", keystore.Shown(orig), num, unit)
			}
		default:
			return 0, fmt.Errorf("duration %s: unknown unit %s (use w, d, h, m, s)", keystore.Shown(orig), keystore.Shown(unit))
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("duration %s: too long", keystore.Shown(orig))
		}
		total += d
	}
	return total, nil
}

func unitName(u string) string {
	if u == "w" {
		return "weeks"
	}
	return "days"
}

// FormatDuration renders d the way ParseDuration reads it, with whole days
// as "d": 720h is "30d", 36h is "1d12h".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		if d == math.MinInt64 {
			return d.String()
		}
		d = -d
	}
	if days := d / Day; days > 0 {
		fmt.Fprintf(&b, "%dd", days)
		d -= days * Day
	}
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dm", m)
		d -= m * time.Minute
	}
	if d > 0 {
		b.WriteString(d.String())
	}
	return b.String()
}

// ParseTime parses an RFC 3339 timestamp ("2026-11-01T00:00:00Z") or a date
// ("2026-11-01", midnight UTC).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("time %s: want RFC 3339 (2026-11-01T00:00:00Z) or a date (2026-11-01)", keystore.Shown(s))
}

// typeErr is how leaf decoders report a problem: yaml.v3 collects
// *yaml.TypeError values from every field and carries on, so all problems of
// a file are reported at once.
func typeErr(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
}

func scalar(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", typeErr(n, "%s: want a scalar, have a %s", what, kindName(n.Kind))
	}
	return n.Value, nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	}
	return "scalar"
}

// duration is a YAML duration field.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalar(n, "duration")
	if err != nil {
		return err
	}
	v, err := ParseDuration(s)
	if err != nil {
		return typeErr(n, "%v", err)
	}
	*d = duration(v)
	return nil
}

// timestamp is a YAML time field.
type timestamp time.Time

func (t *timestamp) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalar(n, "time")
	if err != nil {
		return err
	}
	v, err := ParseTime(s)
	if err != nil {
		return typeErr(n, "%v", err)
	}
	*t = timestamp(v)
	return nil
}

package metrics

import (
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The text exposition format of the per-peer series, written as
// expfmt.MetricFamilyToText writes it, from each family's series text
// (built from the shared label pieces when it sorts, family.go) and values.

// labelEscaper and helpEscaper escape label values and help text as the
// text exposition format (and expfmt) does.
var (
	labelEscaper = strings.NewReplacer("\\", `\\`, "\n", `\n`, "\"", `\"`)
	helpEscaper  = strings.NewReplacer("\\", `\\`, "\n", `\n`)
)

// appendText appends the family in the text exposition format (as
// expfmt.MetricFamilyToText writes it), nothing when it has no series.
func (f *family) appendText(b []byte, now float64) []byte {
	if len(f.rows) == 0 {
		return b
	}
	f.sort()
	b = append(b, f.head...)
	start := int32(0)
	for k, idx := range f.order {
		b = append(b, f.name...)
		b = append(b, f.blob[start:f.ends[k]]...)
		b = appendFloat(b, f.value(idx, now))
		b = append(b, '\n')
		start = f.ends[k]
	}
	return b
}

// appendFloat formats v as expfmt does.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case v == 1:
		return append(b, '1')
	case v == 0:
		return append(b, '0')
	case v == -1:
		return append(b, "-1"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case v > -1e6 && v < 1e6 && v == math.Trunc(v):
		// What 'g' writes for an integer below 1e6 (from 1e6 on it
		// writes an exponent), without its float formatting: most
		// values (IDs, counts, counters of steady sessions) are such.
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// flushAt is how much text writeText gathers before it writes: small
// families go out together, a large one on its own.
const flushAt = 64 << 10

// writeText writes b (the registry's part of the scrape), then every
// per-peer family in the text format, to w: each family is appended to b
// under the store's lock, and b written out (and reused) once it holds
// flushAt, or at the end, without the lock. It returns b, to be reused by
// the next scrape: it has held at most flushAt and the largest family.
func (s *peerStore) writeText(w io.Writer, b []byte, now float64) ([]byte, error) {
	for _, f := range s.families() {
		s.mu.Lock()
		if n := len(f.rows); n > 0 {
			// Grown once per family (hundreds of kilobytes at thousands
			// of peers): each series' text and a value of up to 24 bytes.
			b = slices.Grow(b, len(f.head)+f.textLen+24*n)
		}
		b = f.appendText(b, now)
		s.mu.Unlock()
		if len(b) >= flushAt {
			if _, err := w.Write(b); err != nil {
				return b[:0], err
			}
			b = b[:0]
		}
	}
	if len(b) > 0 {
		if _, err := w.Write(b); err != nil {
			return b[:0], err
		}
	}
	return b[:0], nil
}

package keystore

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The parsers of a key's single field values, shared by the file and Vault
// decoders. Their errors are refusals (see refuse): they never quote the
// value, nor anything derived from it.

// maxMACLen is the largest MAC length the kernel accepts: TCP-AO must fit
// into a SYN's option space next to MSS, timestamps and window scaling
// (net/ipv4/tcp_ao.c, EMSGSIZE), and 16 is also no more than the digest size
// of every supported algorithm.
const maxMACLen = 16

// scalarText returns the text of a scalar (string or number).
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case number:
		return string(x), true
	}
	return "", false
}

// parseInt parses an integer in lo..hi; no says what the field wants.
func parseInt(v any, lo, hi int64, no error) (int64, error) {
	s, ok := scalarText(v)
	if !ok {
		return 0, no
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, no
	}
	return n, nil
}

// The refusals of the integer fields.
var (
	errKeyID  = refuse("not an integer 0..255 (a KeyID)")
	errMACLen = refuse("not an integer 1..16 (the MAC length in bytes)")
)

// decodeSecret decodes a secret field's value into a new buffer that the
// caller wipes. The value is the input's own text (secretText), or a string
// when the decoder could not keep the text out of its strings (then its
// copy here is wiped).
func decodeSecret(v any, isHex bool) ([]byte, error) {
	switch x := v.(type) {
	case secretText:
		return decodeSecretText(x, isHex)
	case string:
		text := heapBytes(x)
		defer clear(text)
		return decodeSecretText(text, isHex)
	}
	return nil, refuse("want a string")
}

// parsePeers parses a list of peer addresses or prefixes (or a single one).
// On error, item is the index of the item at fault, -1 for the list.
func parsePeers(v any) (out []netip.Prefix, item int, err error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case string:
		items = []any{x}
	default:
		return nil, -1, refuse("want a list of addresses or prefixes")
	}
	if len(items) == 0 {
		return nil, -1, refuse("empty list")
	}
	if len(items) > maxPeers {
		return nil, -1, refuse("more than 4096 peers (at most 4096 per key or chain)")
	}
	out = make([]netip.Prefix, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, i, refuse("want an address or prefix string")
		}
		p, err := parsePrefix(s)
		if err != nil {
			return nil, i, err
		}
		out = append(out, p)
	}
	return out, -1, nil
}

// peersField names the peers field, or the item at fault in it.
func peersField(item int) string {
	if item < 0 {
		return "peers"
	}
	return "peers[" + strconv.Itoa(item) + "]"
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, refuse("not an IPv4 or IPv6 address (without a zone), nor a prefix")
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, refuse("not a prefix (address/length)")
	}
	if p != p.Masked() {
		return netip.Prefix{}, refuse("prefix has host bits set (give its network address)")
	}
	return p, nil
}

var vrfName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,15}$`)

func parseVRF(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", refuse("want an interface name")
	}
	if s != "" && !vrfName.MatchString(s) {
		return "", refuse("not a VRF device name (1..15 of A-Za-z0-9_.:-)")
	}
	return s, nil
}

// parseLifetime accepts "always", or a mapping {start, end} or {start,
// duration}; start and end are RFC 3339, duration is a Go duration with an
// optional "d" (days) unit or an integer number of seconds (RFC 8177). On
// error, sub is the sub-field at fault ("start", ...), "" for the whole.
func parseLifetime(v any) (l Lifetime, sub string, err error) {
	errWant := refuse(`want "always" or {start, end|duration}`)
	if s, ok := v.(string); ok {
		if s == "always" {
			return Always, "", nil
		}
		return Lifetime{}, "", errWant
	}
	o, ok := v.(*object)
	if !ok {
		return Lifetime{}, "", errWant
	}
	if err := checkFields(o, lifetimeFields); err != nil {
		return Lifetime{}, "", err
	}
	if sv, ok := o.get("start"); ok {
		if l.Start, err = parseTime(sv); err != nil {
			return Lifetime{}, "start", err
		}
	}
	ev, hasEnd := o.get("end")
	dv, hasDur := o.get("duration")
	switch {
	case hasEnd && hasDur:
		return Lifetime{}, "", refuse("give end or duration, not both")
	case hasEnd:
		if l.End, err = parseTime(ev); err != nil {
			return Lifetime{}, "end", err
		}
	case hasDur:
		if l.Start.IsZero() {
			return Lifetime{}, "duration", refuse("duration needs a start")
		}
		d, err := parseDuration(dv)
		if err != nil {
			return Lifetime{}, "duration", err
		}
		l.End = l.Start.Add(d)
	}
	if !l.Start.IsZero() && !l.End.IsZero() && !l.End.After(l.Start) {
		return Lifetime{}, "", refuse("end is not after start")
	}
	return l, "", nil
}

func parseTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, refuse("want an RFC 3339 time")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, refuse("not an RFC 3339 time (like 2026-11-01T00:00:00Z)")
	}
	return t, nil
}

const maxDuration = 100 * 365 * 24 * time.Hour

// errDuration is every refusal of a duration.
var errDuration = refuse("not a duration: want seconds, a Go duration (90m, 36h) or days (30d), > 0 and at most 100 years")

func parseDuration(v any) (time.Duration, error) {
	var d time.Duration
	switch x := v.(type) {
	case number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil || n <= 0 || n > int64(maxDuration/time.Second) {
			return 0, errDuration
		}
		d = time.Duration(n) * time.Second
	case string:
		if days, ok := strings.CutSuffix(x, "d"); ok {
			n, err := strconv.ParseInt(days, 10, 64)
			if err != nil || n <= 0 || n > 100*365 {
				return 0, errDuration
			}
			d = time.Duration(n) * 24 * time.Hour
		} else {
			var err error
			if d, err = time.ParseDuration(x); err != nil {
				return 0, errDuration
			}
		}
	default:
		return 0, errDuration
	}
	if d <= 0 || d > maxDuration {
		return 0, errDuration
	}
	return d, nil
}

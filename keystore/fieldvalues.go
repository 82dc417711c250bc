package keystore

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The parsers of a key's single field values, shared by the file and Vault
// decoders. Their errors never quote a secret.

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

func parseInt(v any, lo, hi int64) (int64, error) {
	var s string
	switch x := v.(type) {
	case number:
		s = string(x)
	case string:
		s = x
	default:
		return 0, bad("want an integer %d..%d", lo, hi)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, bad("%q, want an integer %d..%d", truncate(s), lo, hi)
	}
	return n, nil
}

// decodeSecret decodes a secret field. Errors never quote the value.
func decodeSecret(v any, isHex bool) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, bad("want a string")
	}
	s = strings.TrimSpace(s)
	if isHex {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, bad("not hexadecimal")
		}
		return b, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, bad("not standard base64 (RFC 4648 section 4, with padding)")
	}
	return b, nil
}

func parsePeers(v any) ([]netip.Prefix, error) {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case string:
		items = []any{x}
	default:
		return nil, bad("want a list of addresses or prefixes")
	}
	if len(items) == 0 {
		return nil, bad("empty list")
	}
	if len(items) > maxPeers {
		return nil, bad("%d peers, at most %d", len(items), maxPeers)
	}
	out := make([]netip.Prefix, 0, len(items))
	for _, it := range items {
		s, ok := it.(string)
		if !ok {
			return nil, bad("want an address or prefix string")
		}
		p, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, bad("%q is not an IPv4 or IPv6 address", truncate(s))
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, bad("%q is not a prefix", truncate(s))
	}
	if p != p.Masked() {
		return netip.Prefix{}, bad("prefix %s has host bits set (want %s)", p, p.Masked())
	}
	return p, nil
}

var vrfName = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,15}$`)

func parseVRF(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", bad("want an interface name")
	}
	if s != "" && !vrfName.MatchString(s) {
		return "", bad("%q is not a VRF device name (1..15 of A-Za-z0-9_.:-)", truncate(s))
	}
	return s, nil
}

// parseLifetime accepts "always", or a mapping {start, end} or {start,
// duration}; start and end are RFC 3339, duration is a Go duration with an
// optional "d" (days) unit or an integer number of seconds (RFC 8177).
func parseLifetime(v any) (Lifetime, error) {
	if s, ok := v.(string); ok {
		if s == "always" {
			return Always, nil
		}
		return Lifetime{}, bad("want \"always\" or {start, end|duration}")
	}
	o, ok := v.(*object)
	if !ok {
		return Lifetime{}, bad("want \"always\" or {start, end|duration}")
	}
	if bad := unknownFields(o, []string{"start", "end", "duration"}); len(bad) > 0 {
		return Lifetime{}, fmt.Errorf("%w: %s", ErrUnknownField, fieldName(bad[0]))
	}
	var l Lifetime
	var err error
	if sv, ok := o.get("start"); ok {
		if l.Start, err = parseTime(sv); err != nil {
			return Lifetime{}, fmt.Errorf("start: %w", err)
		}
	}
	ev, hasEnd := o.get("end")
	dv, hasDur := o.get("duration")
	switch {
	case hasEnd && hasDur:
		return Lifetime{}, bad("give end or duration, not both")
	case hasEnd:
		if l.End, err = parseTime(ev); err != nil {
			return Lifetime{}, fmt.Errorf("end: %w", err)
		}
	case hasDur:
		if l.Start.IsZero() {
			return Lifetime{}, bad("duration needs a start")
		}
		d, err := parseDuration(dv)
		if err != nil {
			return Lifetime{}, fmt.Errorf("duration: %w", err)
		}
		l.End = l.Start.Add(d)
	}
	if !l.Start.IsZero() && !l.End.IsZero() && !l.End.After(l.Start) {
		return Lifetime{}, bad("end %s is not after start %s",
			l.End.UTC().Format(time.RFC3339), l.Start.UTC().Format(time.RFC3339))
	}
	return l, nil
}

func parseTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, bad("want an RFC 3339 time")
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, bad("%q is not an RFC 3339 time", truncate(s))
	}
	return t, nil
}

const maxDuration = 100 * 365 * 24 * time.Hour

func parseDuration(v any) (time.Duration, error) {
	var d time.Duration
	switch x := v.(type) {
	case number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil || n <= 0 || n > int64(maxDuration/time.Second) {
			return 0, bad("%q, want seconds > 0", truncate(string(x)))
		}
		d = time.Duration(n) * time.Second
	case string:
		if days, ok := strings.CutSuffix(x, "d"); ok {
			n, err := strconv.ParseInt(days, 10, 64)
			if err != nil || n <= 0 || n > 100*365 {
				return 0, bad("%q, want days > 0", truncate(x))
			}
			d = time.Duration(n) * 24 * time.Hour
		} else {
			var err error
			if d, err = time.ParseDuration(x); err != nil {
				return 0, bad("%q is not a duration", truncate(x))
			}
		}
	default:
		return 0, bad("want a duration")
	}
	if d <= 0 || d > maxDuration {
		return 0, bad("duration must be > 0 and at most 100 years")
	}
	return d, nil
}

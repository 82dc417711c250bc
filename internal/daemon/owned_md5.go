package daemon

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"

	"github.com/aokeyd/aokeyd/tcpao"
)

// The TCP-MD5 part of the ownership record: the passwords (fingerprints)
// aokeyd installed, by peer prefix. An installed MD5 key with one of them
// is aokeyd's, whichever listener holds it and whatever the source holds
// now: a password changed in the source while aokeyd was down is then a
// change of aokeyd's own key (held back, aoctl replace --md5), never
// taken for a speaker's own password line.

// md5Row is one prefix's passwords in the record's file.
type md5Row struct {
	Prefix       string   `json:"prefix"`
	Fingerprints []string `json:"fingerprints"`
}

// recordMD5 notes that aokeyd installed the password fp for prefix p.
func (l *ledger) recordMD5(p netip.Prefix, fp tcpao.Fingerprint) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.md5 == nil {
		l.md5 = map[netip.Prefix][]tcpao.Fingerprint{}
	}
	if !slices.Contains(l.md5[p], fp) {
		l.md5[p] = append(l.md5[p], fp)
		l.changedLocked()
	}
}

// ownsMD5 reports whether aokeyd installed the password fp for prefix p.
func (l *ledger) ownsMD5(p netip.Prefix, fp tcpao.Fingerprint) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.md5[p], fp)
}

// md5Rows is the file form of the passwords (l.mu held).
func (l *ledger) md5Rows() []md5Row {
	var out []md5Row
	for p, fps := range l.md5 {
		r := md5Row{Prefix: p.String()}
		for _, fp := range fps {
			r.Fingerprints = append(r.Fingerprints, hex.EncodeToString(fp[:]))
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b md5Row) int { return cmpString(a.Prefix, b.Prefix) })
	return out
}

// loadMD5 takes the passwords from the record's file.
func (l *ledger) loadMD5(path string, rows []md5Row) error {
	for i, r := range rows {
		p, err := netip.ParsePrefix(r.Prefix)
		if err != nil {
			return fmt.Errorf("ownership record %s: md5[%d].prefix: %w", path, i, err)
		}
		for _, s := range r.Fingerprints {
			b, err := hex.DecodeString(s)
			if err != nil || len(b) != len(tcpao.Fingerprint{}) {
				return fmt.Errorf("ownership record %s: md5[%d].fingerprints: not %d hex bytes", path, i, len(tcpao.Fingerprint{}))
			}
			if l.md5 == nil {
				l.md5 = map[netip.Prefix][]tcpao.Fingerprint{}
			}
			l.md5[p] = append(l.md5[p], tcpao.Fingerprint(b))
		}
	}
	return nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

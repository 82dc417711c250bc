package keystore

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"regexp"
	"strconv"
)

// A key's name is shown wherever the key is: status, plan, peer-config,
// the fleet document, the log. A secret pasted into name: would be shown
// with it, so a name must be a plain identifier, and the refusal never
// shows the value.

// keyName is a plain identifier: 1..64 of A-Za-z0-9._-, starting with a
// letter or a digit (as a chain name). Every name in aokeyd's docs and
// examples is one: 2026-10, demo-1, k1.
var keyName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// maxNameRun is the longest run of letters and digits a name may have
// without one of . _ -: key material (hex, unpadded base64) is such a
// run, names are words, dates and numbers joined by separators.
const maxNameRun = 23

// Shown is s quoted, for a problem to show a value of operator input, or
// "(not shown)" when s could be key material: longer than 64 bytes, or
// with a run of 20 or more characters of the base64 and hex alphabets
// (head -c 20 /dev/urandom | base64 is one such run, a Vault token has
// one). Addresses, names, durations and times are shown.
func Shown(s string) string {
	if len(s) > 64 || materialRun.MatchString(s) {
		return "(not shown)"
	}
	return strconv.Quote(s)
}

var materialRun = regexp.MustCompile(`[A-Za-z0-9+/=]{20}`)

// PlainName reports whether s is a plain identifier that does not look
// like key material: a name a problem may show (a chain's, a key's). A
// value that is not one may be a secret pasted on the wrong line.
func PlainName(s string) bool { return plainName(s) }

// plainName reports whether s is a plain identifier that does not look
// like key material.
func plainName(s string) bool {
	if !keyName.MatchString(s) {
		return false
	}
	run := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '.' || c == '_' || c == '-' {
			run = 0
			continue
		}
		if run++; run > maxNameRun {
			return false
		}
	}
	return true
}

// nameIsSecret reports whether name is secret itself, or secret in hex or
// base64: a secret pasted into both name: and the secret's field. What it
// decodes is cleared.
func nameIsSecret(name string, secret []byte) bool {
	raw := []byte(name)
	same := subtle.ConstantTimeCompare(raw, secret) == 1
	clear(raw)
	for _, dec := range []func(string) ([]byte, error){hex.DecodeString,
		base64.StdEncoding.DecodeString, base64.RawStdEncoding.DecodeString,
		base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString} {
		b, err := dec(name)
		if err == nil && subtle.ConstantTimeCompare(b, secret) == 1 {
			same = true
		}
		clear(b)
	}
	return same
}

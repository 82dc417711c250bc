package keystore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The fields a key source defines at each level, in the order the
// problems list them.
var (
	topFields = []string{"chains"}
	keyFields = []string{"name", "send_id", "recv_id", "algorithm", "secret_b64", "secret_hex", "maclen",
		"peers", "vrf", "tcp_options", "send_lifetime", "accept_lifetime", "revoked"}
	chainFields    = []string{"peers", "vrf", "keys", "md5"}
	md5Fields      = []string{"secret_b64", "secret_hex", "revoked"}
	lifetimeFields = []string{"start", "end", "duration"}
)

// unknownFieldError is the problem of a field a level of the key source
// does not define. It says where the field is (line and column in a key
// file; 0 in a Vault document, whose problems name the key instead) and
// which fields are allowed there, and never the field's name: a broken
// line, or a flow mapping such as `md5: {PASSWORD}`, makes a secret's text
// a mapping key.
type unknownFieldError struct {
	line, col int
	allowed   []string
}

func (e *unknownFieldError) Error() string {
	return fmt.Sprintf("%s (its name is not shown); allowed here: %s", ErrUnknownField, strings.Join(e.allowed, ", "))
}

func (e *unknownFieldError) Unwrap() error { return ErrUnknownField }

// checkFields returns the problem of the first field of o not in allowed,
// nil when every field is allowed.
func checkFields(o *object, allowed []string) error {
	for _, k := range o.keys {
		if !slices.Contains(allowed, k) {
			return &unknownFieldError{line: o.lines[k], col: o.cols[k], allowed: allowed}
		}
	}
	return nil
}

// placeOf is where err's problem is: an unknown field's own line and
// column when it has them, else pos.
func placeOf(err error, pos Pos) Pos {
	var u *unknownFieldError
	if errors.As(err, &u) && u.line > 0 {
		pos.Line, pos.Column = u.line, u.col
	}
	return pos
}

// schemaField returns s when it is a field the key source defines at some
// level, and "" otherwise: the only mapping keys a problem may name (a
// chain's name, checked on its own, aside).
func schemaField(s string) string {
	for _, fs := range [][]string{topFields, keyFields, chainFields, md5Fields, lifetimeFields} {
		if slices.Contains(fs, s) {
			return s
		}
	}
	return ""
}

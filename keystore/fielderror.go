package keystore

import (
	"errors"
	"fmt"
	"strings"
)

// The sentinels every decoder of operator input wraps: the key sources here,
// the policy (package policy) and aokeyd's config. Each is defined once, so
// errors.Is classifies a problem the same way whichever file it came from.
// A decoder's own reasons (ErrNoChains, ErrInsecureFile, policy.ErrGap, …)
// stay in its package and are wrapped in a FieldError the same way.
var (
	// ErrSyntax: the input is not well-formed (YAML or JSON), or a value
	// has the wrong type or format.
	ErrSyntax = errors.New("syntax error")
	// ErrMissingField: a required field is absent.
	ErrMissingField = errors.New("missing required field")
	// ErrInvalid: a value is well-formed but not allowed.
	ErrInvalid = errors.New("invalid value")
	// ErrDuplicate: a field, name or ID that must be unique is given twice.
	ErrDuplicate = errors.New("duplicate")
	// ErrUnknownField: a field the format does not define.
	ErrUnknownField = errors.New("unknown field")
)

// Pos is a position in an input file. Line and Column are 1-based; 0 means
// unknown.
type Pos struct {
	File   string
	Line   int
	Column int
}

func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// FieldError is one problem in operator input: a key source, a policy or a
// config file. It names where the problem is, the field, and the key chain
// and key it concerns, and it never carries key bytes (nor their length).
// Err wraps one of the sentinels above or a decoder's own.
//
// It renders in one of two shapes, by what is known of the place:
//
//	file:line:col: field.path: chain "c" key "k" (source): reason
//	source: chain "c" key "k": field name: reason
//
// The first is a problem at a position in a file (Pos set; the policy and
// the config); the chain and key, when set, are the key source's and Source
// says where that key came from. The second is a problem inside a key
// source (Pos unset): Source is the location ("file /etc/aokeyd/keys.yaml:12",
// "vault secret/aokeyd/chains/core@v3") and Field a field of that key.
// Parts that are empty are left out.
type FieldError struct {
	// Pos is the position in the file decoded (policy, config); zero when
	// the problem is inside a key source.
	Pos
	// Field is the offending field: a YAML path in the file at Pos
	// ("peers[2].key_chain"), or a key's field name in a key source.
	Field string
	// Chain and Key name the key source's chain and MKT the problem
	// concerns, "" when none. Key is the MKT's name, or "#N" (1-based
	// position) when it has none.
	Chain string
	Key   string
	// Source is where the chain or key came from in the key source.
	Source string
	Err    error
}

func (e *FieldError) Error() string {
	var b strings.Builder
	sep := func() {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
	}
	positioned := e.Pos != (Pos{})
	if positioned {
		b.WriteString(e.Pos.String())
		if e.Field != "" {
			sep()
			b.WriteString(e.Field)
		}
	} else {
		b.WriteString(e.Source)
	}
	if e.Chain != "" || e.Key != "" {
		sep()
		if e.Chain != "" {
			fmt.Fprintf(&b, "chain %q", e.Chain)
		}
		if e.Key != "" {
			if e.Chain != "" {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "key %q", e.Key)
		}
		if positioned && e.Source != "" {
			b.WriteString(" (" + e.Source + ")")
		}
	}
	if !positioned && e.Field != "" {
		sep()
		b.WriteString("field " + e.Field)
	}
	sep()
	if e.Err == nil {
		b.WriteString("unknown problem")
	} else {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *FieldError) Unwrap() error { return e.Err }

// FieldErrors is every problem a decoder found at once, in input order. It
// is an error; errors.Is and errors.As see each FieldError.
type FieldErrors []*FieldError

func (es FieldErrors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the problems for errors.Is and errors.As.
func (es FieldErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Err returns es as an error, or nil when there are none.
func (es FieldErrors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

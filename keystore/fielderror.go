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
// unknown. File is the file's path, or for a Vault chain its place
// ("vault:secret/aokeyd/chains/core@v3"), which has no lines.
type Pos struct {
	File   string
	Line   int
	Column int
}

// String is FILE:LINE:COL, the parts that are unknown left out.
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
// and key it concerns, what to do when there is more to say than what the
// field wants, and it never carries key bytes (nor their length), nor a
// value of a field that could be a secret pasted on the wrong line. Err
// wraps one of the sentinels above or a decoder's own.
//
// Every problem renders in the one shape `aoctl validate` promises, the
// parts that are empty left out:
//
//	FILE:LINE:COL: FIELD: chain "c" key "k" (SOURCE): PROBLEM; HINT
//
// FILE is the file the problem is in (the config, the policy, the key
// file, or a Vault chain's place) and FIELD the YAML path of the field
// there ("peers[2].key_chain", "chains.core.keys[0].send_id"). The chain
// and key name the key source's chain and MKT the problem concerns; SOURCE,
// set only when FILE is another file (a policy problem about a key), says
// where that key is. Report gives the same parts as a value, for JSON.
type FieldError struct {
	// Pos is where the problem is.
	Pos
	// Field is the offending field's YAML path in Pos.File.
	Field string
	// Chain and Key name the key source's chain and MKT the problem
	// concerns, "" when none. Key is the MKT's name, or "#N" (1-based
	// position) when it has none.
	Chain string
	Key   string
	// Source is where the chain or key is in the key source ("keys.yaml:12:9")
	// when that is not Pos.
	Source string
	// Hint is what to do, when the reason does not say it already.
	Hint string
	Err  error
}

// Report is a problem as `aoctl validate --json` gives it: the parts of
// a FieldError, or of any other error its text as the problem.
type Report struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	Field  string `json:"field"`
	// Problem is what is wrong: the chain and key it concerns, when
	// any, and the reason.
	Problem string `json:"problem"`
	// Hint is what to do, "" when Problem says it.
	Hint string `json:"hint"`
}

// String renders r as FILE:LINE:COL: FIELD: PROBLEM; HINT.
func (r Report) String() string {
	var parts []string
	if p := (Pos{File: r.File, Line: r.Line, Column: r.Column}).String(); p != "" {
		parts = append(parts, p)
	}
	if r.Field != "" {
		parts = append(parts, r.Field)
	}
	parts = append(parts, r.Problem)
	s := strings.Join(parts, ": ")
	if r.Hint != "" {
		s += "; " + r.Hint
	}
	return s
}

// Report returns e's parts.
func (e *FieldError) Report() Report {
	var b strings.Builder
	chain := e.Chain
	if e.chainInField() {
		chain = "" // the path names it: chains.core.keys[0]
	}
	if chain != "" {
		fmt.Fprintf(&b, "chain %q", chain)
	}
	if e.Key != "" {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "key %q", e.Key)
	}
	if e.Source != "" && b.Len() > 0 {
		b.WriteString(" (" + e.Source + ")")
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Err == nil {
		b.WriteString("unknown problem")
	} else {
		b.WriteString(e.Err.Error())
	}
	return Report{File: e.File, Line: e.Line, Column: e.Column, Field: e.Field, Problem: b.String(), Hint: e.Hint}
}

// chainInField reports whether Field is a key file's path into e's chain
// ("chains.core", "chains.core.keys[0].send_id").
func (e *FieldError) chainInField() bool {
	p := "chains." + e.Chain
	return e.Chain != "" && (e.Field == p || strings.HasPrefix(e.Field, p+"."))
}

func (e *FieldError) Error() string { return e.Report().String() }

func (e *FieldError) Unwrap() error { return e.Err }

// Where is where the problem is as text: Pos, or Source when Pos is
// unknown.
func (e *FieldError) Where() string {
	if s := e.Pos.String(); s != "" {
		return s
	}
	return e.Source
}

// ReportOf is err's Report: a *FieldError's parts, or any other error's
// text as the problem.
func ReportOf(err error) Report {
	if fe, ok := err.(*FieldError); ok {
		return fe.Report()
	}
	return Report{Problem: err.Error()}
}

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

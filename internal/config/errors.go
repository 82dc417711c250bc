package config

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors; every *Error wraps one of them.
var (
	// ErrSyntax: not well-formed YAML, an unknown field, a duplicate key or
	// a value of the wrong type.
	ErrSyntax = errors.New("syntax error")
	// ErrMissing: a required field is absent.
	ErrMissing = errors.New("missing required field")
	// ErrInvalid: a value is well-formed but not allowed.
	ErrInvalid = errors.New("invalid value")
)

// Error is one problem in a config file, with its position and field path
// ("key_source.vault.auth.method").
type Error struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.File == "" {
		b.WriteString("config")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Errors is every problem Parse found, in file order. errors.Is and
// errors.As see each Error.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the problems for errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

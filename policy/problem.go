package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every Problem wraps exactly one of them, so callers and
// tests classify problems with errors.Is.
var (
	// ErrSyntax: the file is not well-formed YAML, has an unknown field, or a
	// value of the wrong type or format.
	ErrSyntax = errors.New("syntax error")
	// ErrInvalid: a value is well-formed but not allowed (a negative or zero
	// interval, an unknown enum value, a missing required field, ...).
	ErrInvalid = errors.New("invalid value")
	// ErrDuplicate: two key chains or two keys of one chain share a name.
	ErrDuplicate = errors.New("duplicate name")
	// ErrUnknownChain: a peer names a key chain the policy does not define,
	// or a key chain names a source chain the snapshot does not have.
	ErrUnknownChain = errors.New("unknown key chain")
	// ErrUnknownKey: a key chain lists an MKT the source chain does not have.
	ErrUnknownKey = errors.New("unknown key")
	// ErrOverlap: two peer bindings in one VRF cover a common address.
	ErrOverlap = errors.New("overlapping peer bindings")
	// ErrDuplicateID: two MKTs that may be installed on one peer's socket at
	// the same time share a SendID or a RecvID (the kernel answers EEXIST).
	ErrDuplicateID = errors.New("duplicate key ID")
	// ErrGap: at some future instant a peer has no key it may send with.
	ErrGap = errors.New("gap in send-key coverage")
	// ErrKeyLength: an MKT or a generated key is empty or longer than
	// tcpao.MaxKeyLen (80) bytes, or not 16 bytes for cmac(aes128).
	ErrKeyLength = errors.New("bad key length")
	// ErrAlgorithm: an algorithm the kernel does not offer.
	ErrAlgorithm = errors.New("unsupported algorithm")
	// ErrMACLength: a MAC length the kernel rejects (more than 16 bytes,
	// which does not fit in a SYN's option space, or more than the digest).
	ErrMACLength = errors.New("bad MAC length")
	// ErrNoBinding: Desired or BindingFor was asked about a peer that no
	// binding covers.
	ErrNoBinding = errors.New("no peer binding")
)

// Pos is a position in a policy file. Line and Column are 1-based; 0 means
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

// Problem is one thing wrong with a policy, alone or together with a key
// snapshot. It names where: the YAML file, line and field path
// ("peers[2].key_chain"), and for problems found in a snapshot the source
// chain and key (never key bytes).
type Problem struct {
	Pos
	// Field is the YAML path of the offending value, "" when unknown.
	Field string
	// Chain and Key name the source chain and MKT for snapshot problems.
	Chain string
	Key   string
	// Source is the MKT's keystore.MKT.Source when known.
	Source string
	// Err wraps one of the sentinel errors above.
	Err error
}

func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Pos.String())
	if p.Field != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(p.Field)
	}
	if p.Chain != "" {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString("chain " + p.Chain)
		if p.Key != "" {
			b.WriteString(" key " + p.Key)
		}
		if p.Source != "" {
			b.WriteString(" (" + p.Source + ")")
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(p.Err.Error())
	return b.String()
}

func (p *Problem) Unwrap() error { return p.Err }

// Problems is every problem found at once, in file order. It is an error;
// errors.Is and errors.As see each Problem.
type Problems []*Problem

func (ps Problems) Error() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Error()
	}
	return strings.Join(s, "\n")
}

func (ps Problems) Unwrap() []error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errs
}

// Err returns ps as an error, or nil when there are none.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

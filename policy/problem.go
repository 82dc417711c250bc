package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aokeyd/aokeyd/keystore"
)

// Problems are reported with keystore's positioned-error type, the one every
// decoder of operator input shares (the key sources, this package and
// aokeyd's config), so one errors.As and one set of sentinels classify a
// problem wherever it was found.
type (
	// Pos is a position in a policy file. Line and Column are 1-based; 0
	// means unknown.
	Pos = keystore.Pos
	// Problem is one thing wrong with a policy, alone or together with a
	// key snapshot. It names where: the YAML file, line and field path
	// ("peers[2].key_chain"), and for problems found in a snapshot the
	// source chain, key and the key's Source (never key bytes). Err wraps
	// one of the sentinels below.
	Problem = keystore.FieldError
	// Problems is every problem found at once, in file order. It is an
	// error; errors.Is and errors.As see each Problem.
	Problems = keystore.FieldErrors
)

// Sentinel errors. Every Problem wraps exactly one of them, so callers and
// tests classify problems with errors.Is. The first five are keystore's
// shared sentinels under the names this package has always used.
var (
	// ErrSyntax: the file is not well-formed YAML, or a value has the
	// wrong type or format.
	ErrSyntax = keystore.ErrSyntax
	// ErrUnknownField: a field the policy format does not define.
	ErrUnknownField = keystore.ErrUnknownField
	// ErrMissingField: a required field is absent or empty.
	ErrMissingField = keystore.ErrMissingField
	// ErrInvalid: a value is well-formed but not allowed (a negative or zero
	// interval, an unknown enum value, ...).
	ErrInvalid = keystore.ErrInvalid
	// ErrDuplicate: two key chains or two keys of one chain share a name,
	// or a mapping repeats a field.
	ErrDuplicate = keystore.ErrDuplicate
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
	// ErrGap: at some instant from now on a peer has no key it may send
	// with. A gap that starts later than now also wraps ErrGapAhead.
	ErrGap = errors.New("gap in send-key coverage")
	// ErrGapAhead: the gap starts after now (the keys cover the peer
	// today). aokeyd and aoctl validate warn of it instead of refusing:
	// a key source valid today must not keep aokeyd from starting (a
	// reboot would leave the speakers' sockets unkeyed), and the running
	// daemon's aokeyd_peer_send_coverage_end_timestamp_seconds and its
	// alert say when it comes. errors.Is(err, ErrGap) holds for it too.
	ErrGapAhead = fmt.Errorf("%w ahead", ErrGap)
	// ErrKeyLength: an MKT or a generated key is empty or longer than
	// tcpao.MaxKeyLen (80) bytes, or not 16 bytes for cmac(aes128).
	ErrKeyLength = errors.New("bad key length")
	// ErrAlgorithm: an algorithm the kernel does not offer.
	ErrAlgorithm = errors.New("unsupported algorithm")
	// ErrMACLength: a MAC length the kernel rejects (more than 16 bytes,
	// which does not fit in a SYN's option space, or more than the digest).
	ErrMACLength = errors.New("bad MAC length")
	// ErrUnreadable: the policy file cannot be opened or read.
	ErrUnreadable = errors.New("the policy cannot be read")
	// ErrNoBinding: Desired or BindingFor was asked about a peer that no
	// binding covers.
	ErrNoBinding = errors.New("no peer binding")
)

// maxListed is how many names a problem lists of what there is.
const maxListed = 20

// nameList lists names for a problem's hint, sorted: the plain ones only
// (keystore.PlainName; any other may be a secret on the wrong line), at
// most maxListed, "none" when there are none.
func nameList(names []string) string {
	var shown []string
	for _, n := range names {
		if keystore.PlainName(n) {
			shown = append(shown, n)
		}
	}
	slices.Sort(shown)
	shown = slices.Compact(shown)
	if len(shown) == 0 {
		return "none"
	}
	if len(shown) > maxListed {
		return strings.Join(shown[:maxListed], ", ") + " and " + strconv.Itoa(len(shown)-maxListed) + " more"
	}
	return strings.Join(shown, ", ")
}

// shown is name quoted when a problem may show it (keystore.PlainName),
// "(not shown)" otherwise.
func shown(name string) string {
	if keystore.PlainName(name) {
		return strconv.Quote(name)
	}
	return "(not shown)"
}

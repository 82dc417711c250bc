package peer

import (
	"errors"
	"fmt"
	"unique"
)

// Link is the interface an interface neighbour peers on, by name. The
// name is interned: a Link is one pointer, comparable, equal exactly when
// the names are (as netip.Addr keeps its zone), so that it costs a Key
// and a bgp.PeerInfo 8 bytes (bgp.PeerInfo stays within the 128 bytes a
// map value may take without an allocation). The zero Link is none.
type Link struct{ h unique.Handle[string] }

// LinkOf is the link named name; "" is the zero Link. The name is not
// checked (CheckLinkName).
func LinkOf(name string) Link {
	if name == "" {
		return Link{}
	}
	return Link{unique.Make(name)}
}

// IsValid reports whether l names an interface.
func (l Link) IsValid() bool { return l != Link{} }

// Name is the interface's name, "" for the zero Link.
func (l Link) Name() string {
	if !l.IsValid() {
		return ""
	}
	return l.h.Value()
}

func (l Link) String() string { return l.Name() }

// ErrLinkName is wrapped by CheckLinkName's errors.
var ErrLinkName = errors.New("not a valid interface name")

// CheckLinkName reports whether name can be a Linux interface's: 1 to 15
// bytes (IFNAMSIZ-1), not "." or "..", printable ASCII without '/', ':'
// (the kernel's dev_valid_name), '%' (an IPv6 zone's separator) or
// whitespace; and it holds a letter, so that a mistyped IPv4 address
// ("10.0.0.256") is refused rather than read as an interface. Every
// interface name a Key is read from passes it, so a Key's text never
// reads back as anything else.
func CheckLinkName(name string) error { return checkLinkName(name) }

func checkLinkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrLinkName)
	case len(name) > 15:
		return fmt.Errorf("%w: %d bytes, at most 15", ErrLinkName, len(name))
	case name == "." || name == "..":
		return fmt.Errorf("%w: %q", ErrLinkName, name)
	}
	letter := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || c == '/' || c == ':' || c == '%' {
			return fmt.Errorf("%w: byte %q at %d", ErrLinkName, c, i)
		}
		letter = letter || ('a' <= c|0x20 && c|0x20 <= 'z')
	}
	if !letter {
		return fmt.Errorf("%w: no letter (a mistyped address?)", ErrLinkName)
	}
	return nil
}

package keystore

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"sort"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ErrNoChains: a key source holds no chains at all.
var ErrNoChains = errors.New("keystore: source holds no chains")

// The generic value tree both decoders produce: string, bool, number (the
// literal text), nil, []any and *object.
type number string

type object struct {
	keys  []string
	vals  map[string]any
	lines map[string]int // line of each field (YAML); 0 when unknown
	cols  map[string]int // column of each field (YAML); 0 when unknown
	line  int
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// Limits that keep decoding cheap on hostile input.
const (
	maxKeysPerChain = 256
	maxPeers        = 4096 // a route server binds hundreds of neighbors to a chain
)

var chainName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// chainDefaults are the chain-level fields keys inherit.
type chainDefaults struct {
	peers []netip.Prefix
	vrf   string
}

// decodeChain validates one chain object. Chain-level problems are returned as
// err (the chain cannot be trusted); per-key problems go into Chain.Rejected.
// pl places a problem (the position and the path of its field); mktSrc
// names an MKT for MKT.Source.
//
// A name that is not a chain name is not shown: it is a value of the key
// source like any other.
func decodeChain(name string, v any, pl placer, mktSrc func(key string, line int) string) (*Chain, error) {
	chainErr := func(field string, err error) error {
		pos, path := pl.chain(field)
		return &FieldError{Pos: placeOf(err, pos), Chain: name, Field: path, Err: err}
	}
	if !chainName.MatchString(name) {
		pos, path := pl.name()
		return nil, &FieldError{Pos: pos, Field: path,
			Err: refuse("chain name (not shown) must be 1..64 of A-Za-z0-9._-, starting with a letter or digit")}
	}
	o, ok := v.(*object)
	if !ok {
		return nil, chainErr("", refuse("chain must be a mapping with keys"))
	}
	if err := checkFields(o, chainFields); err != nil {
		return nil, chainErr("", err)
	}
	var def chainDefaults
	if pv, ok := o.get("peers"); ok {
		p, item, err := parsePeers(pv)
		if err != nil {
			return nil, chainErr(peersField(item), err)
		}
		def.peers = p
	}
	if vv, ok := o.get("vrf"); ok {
		s, err := parseVRF(vv)
		if err != nil {
			return nil, chainErr("vrf", err)
		}
		def.vrf = s
	}
	var md5 *MD5Password
	if mv, ok := o.get("md5"); ok {
		p, field, err := decodeMD5(mv, def, mktSrc("md5", o.lines["md5"]))
		if err != nil {
			return nil, chainErr(field, err)
		}
		p.At, p.Path = pl.chain("md5")
		md5 = p
	}
	kv, ok := o.get("keys")
	if !ok && md5 != nil {
		// A chain of TCP-MD5 peers that have no TCP-AO keys yet.
		return &Chain{Name: name, MD5: md5}, nil
	}
	if !ok {
		return nil, chainErr("keys", ErrMissingField)
	}
	list, ok := kv.([]any)
	if !ok {
		md5.Zero()
		return nil, chainErr("keys", refuse("want a list of keys"))
	}
	if len(list) > maxKeysPerChain {
		md5.Zero()
		return nil, chainErr("keys", refuse("more than 256 keys (at most 256 per chain)"))
	}
	c := &Chain{Name: name, MD5: md5}
	seen := map[string]bool{}
	for i, item := range list {
		m, err := decodeKey(name, i, item, def, pl, mktSrc)
		if err != nil {
			c.Rejected = append(c.Rejected, err)
			continue
		}
		if seen[m.Name] {
			m.Zero()
			pos, path := pl.key(i, "name")
			c.Rejected = append(c.Rejected, &FieldError{Pos: pos, Chain: name, Key: m.Name, Field: path,
				Err: fmt.Errorf("%w: another key of the chain has this name", ErrDuplicate)})
			continue
		}
		seen[m.Name] = true
		c.Keys = append(c.Keys, m)
	}
	return c, nil
}

// decodeKey validates key number idx of chain. The returned error is a
// *FieldError.
func decodeKey(chain string, idx int, v any, def chainDefaults, pl placer, mktSrc func(string, int) string) (m MKT, err error) {
	keyName := fmt.Sprintf("#%d", idx+1)
	o, ok := v.(*object)
	fail := func(field string, e error) (MKT, error) {
		m.Zero()
		pos, path := pl.key(idx, field)
		return MKT{}, &FieldError{Pos: placeOf(e, pos), Chain: chain, Key: keyName, Field: path, Err: e}
	}
	if !ok {
		return fail("", refuse("a key must be a mapping"))
	}
	nv, ok := o.get("name")
	if !ok {
		return fail("name", ErrMissingField)
	}
	s, isStr := scalarText(nv)
	if !isStr || !plainName(s) {
		return fail("name", refuse("the name (not shown) must be a plain identifier: 1..64 of A-Za-z0-9._-, starting with a letter or digit, without a run of 24 letters and digits (key material looks like that), e.g. 2026-10; the name is shown by status, plan and peer-config"))
	}
	keyName = s
	if err := checkFields(o, keyFields); err != nil {
		return fail("", err)
	}
	m = MKT{Name: keyName, Chain: chain, Source: mktSrc(keyName, o.line), IncludeTCPOptions: true}
	m.At, m.Path = pl.key(idx, "")
	// Each step fills part of m and names the field it failed on; fail
	// zeroes m, secret included, whichever step failed.
	if field, err := decodeKeyIDs(o, &m); err != nil {
		return fail(field, err)
	}
	if field, err := decodeKeyCrypto(o, &m); err != nil {
		return fail(field, err)
	}
	if nameIsSecret(keyName, m.Secret.Bytes()) {
		keyName = fmt.Sprintf("#%d", idx+1) // the name is not shown
		return fail("name", refuse("the name (not shown) is the key's own secret: name the key with a plain identifier, e.g. 2026-10, and never paste the secret anywhere but secret_b64 or secret_hex"))
	}
	if field, err := decodeKeyScope(o, &m, def); err != nil {
		return fail(field, err)
	}
	if field, err := decodeKeyOptions(o, &m); err != nil {
		return fail(field, err)
	}
	return m, nil
}

// decodeKeyIDs reads the key's send_id and recv_id.
func decodeKeyIDs(o *object, m *MKT) (string, error) {
	for _, f := range []struct {
		name string
		dst  *uint8
	}{{"send_id", &m.SendID}, {"recv_id", &m.RecvID}} {
		fv, ok := o.get(f.name)
		if !ok {
			return f.name, ErrMissingField
		}
		n, err := parseInt(fv, 0, 255, errKeyID)
		if err != nil {
			return f.name, err
		}
		*f.dst = uint8(n)
	}
	return "", nil
}

// decodeKeyCrypto reads the algorithm, the secret and the MAC length, and
// checks the secret's length against the algorithm. m.Secret is set as soon
// as it is decoded, so a later failure zeroes it with m.
func decodeKeyCrypto(o *object, m *MKT) (string, error) {
	av, ok := o.get("algorithm")
	if !ok {
		return "algorithm", ErrMissingField
	}
	as, _ := scalarText(av)
	alg, err := tcpao.ParseAlgorithm(as)
	if err != nil {
		return "algorithm", refuse("want one of hmac(sha1), hmac(sha256), cmac(aes128)")
	}
	m.Algorithm = alg
	field, err := decodeKeySecret(o, m)
	if err != nil {
		return field, err
	}
	if n := m.Secret.Len(); n < 1 || n > tcpao.MaxKeyLen {
		return field, refuse("want 1..80 bytes")
	}
	if m.Algorithm == tcpao.CMACAES128 && m.Secret.Len() != 16 {
		return field, refuse("cmac(aes128) wants exactly 16 bytes")
	}
	m.MACLen = tcpao.DefaultMACLen
	if mv, ok := o.get("maclen"); ok {
		n, err := parseInt(mv, 1, maxMACLen, errMACLen)
		if err != nil {
			return "maclen", err
		}
		m.MACLen = uint8(n)
	}
	return "", nil
}

// decodeMD5 validates a chain's md5 object: one of secret_b64 and
// secret_hex, and revoked. The password applies to the chain's peers and
// VRF, which it must have. The error names the field as "md5.FIELD"; it
// never shows the password, nor its length.
func decodeMD5(v any, def chainDefaults, src string) (*MD5Password, string, error) {
	o, ok := v.(*object)
	if !ok {
		return nil, "md5", refuse("want a mapping with secret_b64 or secret_hex")
	}
	if err := checkFields(o, md5Fields); err != nil {
		return nil, "md5", err
	}
	if len(def.peers) == 0 {
		return nil, "peers", fmt.Errorf("%w: a chain with an md5 password names its peers", ErrMissingField)
	}
	var m MKT
	field, err := decodeKeySecret(o, &m)
	if err != nil {
		return nil, "md5." + field, err
	}
	if !md5Printable(m.Secret.Bytes()) {
		m.Zero()
		return nil, "md5." + field, refuse("a TCP-MD5 password wants 1..80 printable ASCII characters without space, quote or backslash (it is written into speakers' configuration lines)")
	}
	p := &MD5Password{Secret: m.Secret, Peers: def.peers, VRF: def.vrf, Source: src}
	if rv, ok := o.get("revoked"); ok {
		b, isBool := rv.(bool)
		if !isBool {
			p.Zero()
			return nil, "md5.revoked", refuse("want true or false")
		}
		p.Revoked = b
	}
	return p, "", nil
}

// md5Printable reports whether b is a password every speaker's
// configuration can hold: 1..80 bytes of '!'..'~' but '"' and '\'.
func md5Printable(b []byte) bool {
	if len(b) == 0 || len(b) > tcpao.MaxMD5KeyLen {
		return false
	}
	for _, c := range b {
		if c < '!' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// decodeKeySecret reads exactly one of secret_b64 and secret_hex into
// m.Secret, zeroing the decoded bytes it copied from. It returns the field
// the secret is in (the one to name in a problem with it), with the error
// when it failed.
func decodeKeySecret(o *object, m *MKT) (string, error) {
	b64, hasB64 := o.get("secret_b64")
	hx, hasHex := o.get("secret_hex")
	switch {
	case hasB64 && hasHex:
		return "secret_hex", refuse("give secret_b64 or secret_hex, not both")
	case !hasB64 && !hasHex:
		return "secret_b64", fmt.Errorf("%w: secret_b64 or secret_hex", ErrMissingField)
	}
	field, v, isHex := "secret_b64", b64, false
	if hasHex {
		field, v, isHex = "secret_hex", hx, true
	}
	raw, err := decodeSecret(v, isHex)
	if err != nil {
		return field, err
	}
	m.Secret = tcpao.NewSecret(raw)
	clear(raw)
	return field, nil
}

// decodeKeyScope reads where the key applies: its peers and VRF, each
// defaulting to the chain's.
func decodeKeyScope(o *object, m *MKT, def chainDefaults) (string, error) {
	var err error
	m.Peers = def.peers
	if pv, ok := o.get("peers"); ok {
		var item int
		if m.Peers, item, err = parsePeers(pv); err != nil {
			return peersField(item), err
		}
	}
	if len(m.Peers) == 0 {
		return "peers", fmt.Errorf("%w: on the key or its chain", ErrMissingField)
	}
	m.VRF = def.vrf
	if vv, ok := o.get("vrf"); ok {
		if m.VRF, err = parseVRF(vv); err != nil {
			return "vrf", err
		}
	}
	return "", nil
}

// decodeKeyOptions reads the optional tcp_options, lifetimes and revoked.
func decodeKeyOptions(o *object, m *MKT) (string, error) {
	if tv, ok := o.get("tcp_options"); ok {
		s, _ := scalarText(tv)
		switch s {
		case "include":
			m.IncludeTCPOptions = true
		case "exclude":
			m.IncludeTCPOptions = false
		default:
			return "tcp_options", refuse("want include or exclude")
		}
	}
	for _, f := range []struct {
		name string
		dst  *Lifetime
	}{{"send_lifetime", &m.SendLifetime}, {"accept_lifetime", &m.AcceptLifetime}} {
		lv, ok := o.get(f.name)
		if !ok {
			continue
		}
		l, sub, err := parseLifetime(lv)
		if err != nil {
			if sub != "" {
				return f.name + "." + sub, err
			}
			return f.name, err
		}
		*f.dst = l
	}
	if !m.AcceptLifetime.Covers(m.SendLifetime) {
		return "send_lifetime", refuse("the send lifetime is not within accept_lifetime (an absent lifetime is always): the peer would drop what the key signs outside it; start sending at or after accept_lifetime's start and stop at or before its end")
	}
	if rv, ok := o.get("revoked"); ok {
		b, isBool := rv.(bool)
		if !isBool {
			return "revoked", refuse("want true or false")
		}
		m.Revoked = b
	}
	return "", nil
}

// sortedKeys returns the keys of a string map in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

package bird

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Key is one entry of a `protocol bgp`'s `keys { key { ... }; }` list, from
// this router's point of view.
type Key struct {
	SendID, RecvID uint8
	Algorithm      tcpao.Algorithm
	Secret         tcpao.Secret
	// Preferred: BIRD sends with it and asks the peer for it (RNext).
	// Deprecated: accepted, never sent with. BIRD needs a key that is not
	// deprecated.
	Preferred, Deprecated bool
}

// Algorithm is BIRD's spelling of a TCP-AO algorithm ("hmac sha256",
// "cmac aes128").
func Algorithm(a tcpao.Algorithm) string {
	switch a {
	case tcpao.CMACAES128:
		return "cmac aes128"
	case tcpao.HMACSHA1:
		return "hmac sha1"
	case tcpao.HMACSHA256:
		return "hmac sha256"
	}
	return algSpelling.Replace(string(a))
}

// algSpelling spells the kernel's other names ("hmac(sha384)") BIRD's
// way; built once (a Replacer per call was most of a 1,000-file read's
// CPU).
var algSpelling = strings.NewReplacer("(", " ", ")", "")

// Check says why BIRD cannot hold k as aokeyd would install it, or nil:
// BIRD has no setting to exclude TCP options from the MAC, nor a MAC
// length other than the kernel's default.
func Check(k tcpao.Key) error {
	switch {
	case k.ExcludeOptions:
		return fmt.Errorf("BIRD has no setting to exclude TCP options from the MAC (tcp_options: exclude): its keys always include them")
	case k.MACLen != 0 && k.MACLen != tcpao.DefaultMACLen:
		return fmt.Errorf("BIRD has no MAC length setting and uses the kernel's %d-byte default; this key's MAC is %d bytes", tcpao.DefaultMACLen, k.MACLen)
	}
	return nil
}

// RenderKeys renders `authentication ao;` and the key list, as the body
// of a file a `protocol bgp` includes. The secrets are in hex: the bytes
// are as secret as the keys, and the caller clears them once written (to
// a file readable by BIRD alone).
func RenderKeys(keys []Key) []byte {
	var b bytes.Buffer
	// Sized once, so that no grown-out buffer keeps a secret's hex.
	b.Grow(64 + len(keys)*(2*tcpao.MaxKeyLen+160))
	b.WriteString("authentication ao;\nkeys {\n")
	h := make([]byte, 2*tcpao.MaxKeyLen)
	defer clear(h)
	for _, k := range keys {
		if k.Secret.Len() > tcpao.MaxKeyLen {
			continue // not a key the kernel takes (keystore refuses it)
		}
		n := hex.Encode(h, k.Secret.Bytes())
		fmt.Fprintf(&b, "\tkey { send id %d; recv id %d; secret hex:", k.SendID, k.RecvID)
		b.Write(h[:n])
		fmt.Fprintf(&b, "; algorithm %s;", Algorithm(k.Algorithm))
		if k.Preferred {
			b.WriteString(" preferred;")
		}
		if k.Deprecated {
			b.WriteString(" deprecated;")
		}
		b.WriteString(" };\n")
	}
	b.WriteString("};\n")
	return b.Bytes()
}

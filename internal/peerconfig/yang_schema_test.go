package peerconfig

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// yangTree is every data node path a key chain document may hold, as RFC
// 8177 (ietf-key-chain, module prefix "ietf-key-chain") and RFC 9648's
// augment of a key (module "ietf-tcp": container authentication, its
// leaf keychain, the choice of container ao or md5, and ao's leaves)
// define them: lists and leaf-lists are written without keys, a node
// from another module than its parent's with its module name, as RFC
// 7951 encodes it. Transcribed from the RFCs' YANG modules (RFC 8177
// section 5, RFC 9648 section 4), config nodes only.
var yangTree = []string{
	"ietf-key-chain:key-chains",
	"ietf-key-chain:key-chains/key-chain",
	"ietf-key-chain:key-chains/key-chain/name",
	"ietf-key-chain:key-chains/key-chain/description",
	"ietf-key-chain:key-chains/key-chain/accept-tolerance",
	"ietf-key-chain:key-chains/key-chain/accept-tolerance/duration",
	"ietf-key-chain:key-chains/key-chain/key",
	"ietf-key-chain:key-chains/key-chain/key/key-id",
	"ietf-key-chain:key-chains/key-chain/key/lifetime",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-accept-lifetime",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-accept-lifetime/always",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-accept-lifetime/start-date-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-accept-lifetime/no-end-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-accept-lifetime/duration",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-accept-lifetime/end-date-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-lifetime",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-lifetime/always",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-lifetime/start-date-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-lifetime/no-end-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-lifetime/duration",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/send-lifetime/end-date-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/accept-lifetime",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/accept-lifetime/always",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/accept-lifetime/start-date-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/accept-lifetime/no-end-time",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/accept-lifetime/duration",
	"ietf-key-chain:key-chains/key-chain/key/lifetime/accept-lifetime/end-date-time",
	"ietf-key-chain:key-chains/key-chain/key/crypto-algorithm",
	"ietf-key-chain:key-chains/key-chain/key/key-string",
	"ietf-key-chain:key-chains/key-chain/key/key-string/keystring",
	"ietf-key-chain:key-chains/key-chain/key/key-string/hexadecimal-string",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication/keychain",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication/ao",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication/ao/send-id",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication/ao/recv-id",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication/ao/include-tcp-options",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication/ao/accept-key-mismatch",
	"ietf-key-chain:key-chains/key-chain/key/ietf-tcp:authentication/md5",
}

// yangAlgorithms are the crypto-algorithm identities that name TCP-AO's
// MACs (RFC 5926): RFC 8177's hmac-sha-1-12 (HMAC-SHA-1-96) and
// hmac-sha-256, and RFC 9648's own aes-128 (AES-128-CMAC-96; RFC 8177's
// aes-cmac-prf-128 is the KDF, not the MAC).
var yangAlgorithms = map[tcpao.Algorithm]string{
	tcpao.HMACSHA1:   "ietf-key-chain:hmac-sha-1-12",
	tcpao.HMACSHA256: "ietf-key-chain:hmac-sha-256",
	tcpao.CMACAES128: "ietf-tcp:aes-128",
}

// yangPaths collects the data node paths of a decoded JSON document.
func yangPaths(prefix string, v any, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			p := k
			if prefix != "" {
				p = prefix + "/" + k
			}
			out[p] = true
			yangPaths(p, c, out)
		}
	case []any:
		for _, c := range x {
			if _, leaf := c.(map[string]any); leaf || c != nil {
				yangPaths(prefix, c, out)
			}
		}
	}
}

// yangCases are the chains every YANG rendering test renders: the golden
// chain, the same for a peer in a VRF and for an IPv6 peer, and one key of
// each algorithm with the TCP options both ways and lifetimes of each form.
func yangCases(t *testing.T) map[string]Link {
	_, l := fixture(t)
	vrf := l
	vrf.VRF = "red"
	v6 := l
	v6.Peer, v6.Local = "2001:db8::2", "2001:db8::1"
	mixed := l
	mixed.Keys = nil
	for i, a := range []tcpao.Algorithm{tcpao.HMACSHA1, tcpao.HMACSHA256, tcpao.CMACAES128} {
		k := l.Keys[0]
		k.Name, k.Algorithm, k.SendID, k.RecvID = "mixed-"+string(a), a, uint8(20+i), uint8(120+i)
		k.IncludeTCPOptions = i%2 == 0
		switch i {
		case 0:
			k.Send, k.Accept = keystore.Lifetime{}, keystore.Lifetime{}
		case 1:
			k.Send = keystore.Lifetime{Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		}
		mixed.Keys = append(mixed.Keys, k)
	}
	return map[string]Link{"golden": l, "vrf": vrf, "ipv6": v6, "mixed": mixed}
}

// TestYANGSchemaPaths: every node of every --for yang rendering is one
// that RFC 8177 and RFC 9648 define, where they define it, and every
// key's crypto-algorithm is the identity that names its TCP-AO MAC.
// (make renderings also validates the renderings with yanglint.)
func TestYANGSchemaPaths(t *testing.T) {
	for name, l := range yangCases(t) {
		var out bytes.Buffer
		refused, err := Render(&out, YANG, l, Options{At: at})
		if err != nil || len(refused) > 0 {
			t.Fatalf("%s: refused %v, err %v", name, refused, err)
		}
		var doc any
		if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
			t.Fatalf("%s: not JSON: %v", name, err)
		}
		got := map[string]bool{}
		yangPaths("", doc, got)
		var bad []string
		for p := range got {
			if !slices.Contains(yangTree, p) {
				bad = append(bad, p)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("%s: nodes the models do not define there:\n  %s", name, strings.Join(bad, "\n  "))
		}
		chains := doc.(map[string]any)["ietf-key-chain:key-chains"].(map[string]any)["key-chain"].([]any)
		for i, k := range chains[0].(map[string]any)["key"].([]any) {
			alg := k.(map[string]any)["crypto-algorithm"]
			if want := yangAlgorithms[l.Keys[i].Algorithm]; alg != want {
				t.Errorf("%s: key %s (%s): crypto-algorithm %v, want %s", name, l.Keys[i].Name, l.Keys[i].Algorithm, alg, want)
			}
		}
	}
}

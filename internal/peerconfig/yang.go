package peerconfig

import (
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The JSON encoding (RFC 7951) of ietf-key-chain (RFC 8177) with the
// ietf-tcp (RFC 9648) augmentation of each key. Field order is the
// models' order.
type (
	yangDoc struct {
		KeyChains yangKeyChains `json:"ietf-key-chain:key-chains"`
	}
	yangKeyChains struct {
		KeyChain []yangKeyChain `json:"key-chain"`
	}
	yangKeyChain struct {
		Name            string        `json:"name"`
		Description     string        `json:"description"`
		AcceptTolerance yangTolerance `json:"accept-tolerance"`
		Key             []yangKey     `json:"key"`
	}
	yangTolerance struct {
		Duration int64 `json:"duration"`
	}
	yangKey struct {
		KeyID           string             `json:"key-id"` // uint64: a string in JSON
		Lifetime        yangLifetimes      `json:"lifetime"`
		CryptoAlgorithm string             `json:"crypto-algorithm"`
		KeyString       yangKeyString      `json:"key-string"`
		Authentication  yangAuthentication `json:"ietf-tcp:authentication"`
	}
	yangLifetimes struct {
		Send   yangLifetime `json:"send-lifetime"`
		Accept yangLifetime `json:"accept-lifetime"`
	}
	yangLifetime struct {
		Always        []any  `json:"always,omitempty"` // type empty: [null]
		StartDateTime string `json:"start-date-time,omitempty"`
		NoEndTime     []any  `json:"no-end-time,omitempty"`
		EndDateTime   string `json:"end-date-time,omitempty"`
	}
	yangKeyString struct {
		Keystring         string `json:"keystring,omitempty"`
		HexadecimalString string `json:"hexadecimal-string,omitempty"`
	}
	// RFC 9648's augment: container authentication { choice { container
	// ao { send-id; recv-id; include-tcp-options; accept-key-mismatch }
	// | container md5 } }.
	yangAuthentication struct {
		AO yangAO `json:"ao"`
	}
	yangAO struct {
		SendID            uint8 `json:"send-id"`
		RecvID            uint8 `json:"recv-id"`
		IncludeTCPOptions bool  `json:"include-tcp-options"`
		AcceptKeyMismatch bool  `json:"accept-key-mismatch"`
	}
)

// yangAlgorithm is the crypto-algorithm identity of TCP-AO's MAC a (its
// 12-byte truncation, RFC 5926): RFC 8177's hmac-sha-1-12 (HMAC-SHA-1-96,
// feature crypto-hmac-sha-1-12) and hmac-sha-256, and RFC 9648's aes-128
// (AES-128-CMAC-96; RFC 8177's aes-cmac-prf-128 is the KDF, not the MAC).
func yangAlgorithm(a tcpao.Algorithm) string {
	switch a {
	case tcpao.HMACSHA1:
		return "ietf-key-chain:hmac-sha-1-12"
	case tcpao.HMACSHA256:
		return "ietf-key-chain:hmac-sha-256"
	case tcpao.CMACAES128:
		return "ietf-tcp:aes-128"
	}
	return ""
}

func yangLife(l keystore.Lifetime) yangLifetime {
	if l.IsAlways() {
		return yangLifetime{Always: []any{nil}}
	}
	y := yangLifetime{StartDateTime: "1970-01-01T00:00:00Z", NoEndTime: []any{nil}}
	if !l.Start.IsZero() {
		y.StartDateTime = fmtTime(l.Start)
	}
	if !l.End.IsZero() {
		y.NoEndTime, y.EndDateTime = nil, fmtTime(l.End)
	}
	return y
}

// yang renders RFC 9648 JSON instance data: the far end's key chain
// (RFC 8177 ietf-key-chain) with each key's TCP-AO send-id, recv-id,
// include-tcp-options and accept-key-mismatch (the ietf-tcp augmentation's
// authentication/ao container). It needs the ietf-key-chain features
// hex-key-string, accept-tolerance, independent-send-accept-lifetime and
// crypto-hmac-sha-1-12 and the ietf-tcp feature authentication.
// Neither model has a MAC length: keys with another than the algorithm's
// 12-byte default are refused. Refusals go to the caller only (JSON has
// no comments).
func (r *renderer) yang() {
	l := r.l
	kc := yangKeyChain{
		Name: l.Chain,
		Description: "Far end of aokeyd's TCP-AO chain " + strconv.Quote(l.Chain) + " for peer " + l.Peer +
			": send-id/recv-id swapped, rendered by aoctl peer-config --for yang. Models: RFC 8177 ietf-key-chain and RFC 9648 ietf-tcp (https://www.rfc-editor.org/rfc/rfc9648).",
		AcceptTolerance: yangTolerance{int64((l.AcceptTolerance + 999_999_999) / 1e9)},
		Key:             []yangKey{},
	}
	for i, k := range l.Keys {
		if k.MACLen != tcpao.DefaultMACLen {
			r.refuse(k.Name, "RFC 8177 and RFC 9648 have no MAC length; this key's MAC is %d bytes, not the algorithm's 12-byte default", k.MACLen)
			continue
		}
		// Always hexadecimal-string, never keystring (which takes any
		// string): the placeholder is no yang:hex-string, whose pattern
		// every validating server checks (yanglint refuses it).
		ks := yangKeyString{HexadecimalString: r.notRendered(r.secret(k, func(b []byte) string {
			h := hex.EncodeToString(b)
			var parts []string
			for j := 0; j < len(h); j += 2 {
				parts = append(parts, h[j:j+2])
			}
			return strings.Join(parts, ":")
		}))}
		kc.Key = append(kc.Key, yangKey{
			KeyID:           strconv.Itoa(i + 1),
			Lifetime:        yangLifetimes{Send: yangLife(k.Send), Accept: yangLife(k.Accept)},
			CryptoAlgorithm: yangAlgorithm(k.Algorithm),
			KeyString:       ks,
			Authentication:  yangAuthentication{AO: yangAO{SendID: k.SendID, RecvID: k.RecvID, IncludeTCPOptions: k.IncludeTCPOptions}},
		})
	}
	doc := yangDoc{KeyChains: yangKeyChains{KeyChain: []yangKeyChain{kc}}}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		r.err = err
		return
	}
	r.printf("%s", b.String())
}

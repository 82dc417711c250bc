package peerconfig

import (
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

const eosDoc = "Arista EOS 4.31.0F and later, BGP TCP-AO (TOI tagged TCPAO, https://arista.com/jp/support/toi/tag/border-gateway-protocol) with `management security` / `session shared-secret profile` (https://www.arista.com/en/um-eos/eos-session-management-commands); VERIFY against your release: the TOI's exact syntax could not be read when this renderer was written"

// eosAlgorithm is EOS's BGP TCP-AO algorithm keyword for a, "" for none.
func eosAlgorithm(a tcpao.Algorithm) string {
	switch a {
	case tcpao.HMACSHA1:
		return "hmac-sha1-96"
	case tcpao.CMACAES128:
		return "aes-128-cmac-96"
	}
	return ""
}

func eosTime(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return t.UTC().Format("01/02/2006 15:04:05")
}

func eosLifetime(l keystore.Lifetime) string {
	end := "infinite"
	if !l.End.IsZero() {
		end = eosTime(l.End)
	}
	return eosTime(l.Start) + " " + end
}

// eos renders a shared-secret profile and the BGP neighbor that uses it.
// An EOS secret has one ID, used as both send-id and recv-id, and the
// algorithm is one setting per neighbor; TCP options are always included.
func (r *renderer) eos() {
	r.header("!", eosDoc)
	l := r.l
	usable := make([]bool, len(l.Keys))
	why := make([]string, len(l.Keys))
	for i, k := range l.Keys {
		switch {
		case eosAlgorithm(k.Algorithm) == "":
			why[i] = fmt.Sprintf("EOS's BGP TCP-AO algorithms are aes-128-cmac-96 and hmac-sha1-96, not %s", k.Algorithm)
		case k.SendID != k.RecvID:
			why[i] = fmt.Sprintf("an EOS shared secret has one key ID, used as both send-id and recv-id; this key's are %d and %d", k.SendID, k.RecvID)
		case !k.IncludeTCPOptions:
			why[i] = "EOS has no setting to exclude TCP options (include-tcp-options false)"
		case k.MACLen != tcpao.DefaultMACLen:
			why[i] = fmt.Sprintf("EOS's TCP-AO MACs are 96 bits (12 bytes); this key's MAC is %d bytes", k.MACLen)
		case !printable(k.Secret.Bytes()):
			why[i] = "EOS takes the secret as text; this key's bytes are not printable ASCII without spaces or quotes"
		default:
			usable[i] = true
		}
	}
	// The neighbor's algorithm: the usable key sent with at the instant.
	var alg tcpao.Algorithm
	if s := l.shared(r.o.At, usable); s >= 0 {
		alg = l.Keys[s].Algorithm
	}
	var lines []string
	for i, k := range l.Keys {
		switch {
		case !usable[i]:
			r.refuse(k.Name, "%s", why[i])
		case k.Algorithm != alg:
			r.refuse(k.Name, "the algorithm is one setting per EOS neighbor (%s, from the key sent with at %s); this key has %s", alg, fmtTime(r.o.At), k.Algorithm)
		default:
			lines = append(lines, fmt.Sprintf("      ! aokeyd key %s\n      secret %d 0 %s receive-lifetime %s transmit-lifetime %s",
				k.Name, k.SendID, r.secret(k, func(b []byte) string { return string(b) }), eosLifetime(k.Accept.Widen(l.AcceptTolerance)), eosLifetime(k.Send)))
		}
	}
	for _, f := range r.refused {
		r.printf("! REFUSED key %s: %s\n", f.Key, f.Reason)
	}
	r.printf("! EOS lifetimes are in the switch's clock zone: these are UTC.\n")
	r.printf("management security\n   session shared-secret profile %s\n", l.Chain)
	for _, s := range lines {
		r.printf("%s\n", s)
	}
	r.printf("!\nrouter bgp <asn>\n")
	if len(lines) > 0 {
		if l.VRF != "" {
			// A VRF peer: the neighbor under the VRF of that name.
			r.printf("   vrf %s\n      neighbor %s password shared-secret profile %s algorithm %s\n", l.VRF, r.local(), l.Chain, eosAlgorithm(alg))
		} else {
			r.printf("   neighbor %s password shared-secret profile %s algorithm %s\n", r.local(), l.Chain, eosAlgorithm(alg))
		}
	}
}

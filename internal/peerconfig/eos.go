package peerconfig

import (
	"errors"
	"fmt"
	"strings"
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
	case tcpao.HMACSHA256:
		return "hmac-sha-256" // EOS 4.31.1F and later
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

// eosLifetime is l in one of EOS's two forms, `infinite` or `<start>
// <end>`, as it stands at the instant at. EOS has no start without an
// end: a key whose start has passed at the instant is `infinite` from
// then on (the same lifetime to the switch from the instant on); one
// whose start is still to come cannot be written, and is an error naming
// what to do.
func eosLifetime(l keystore.Lifetime, at time.Time) (string, error) {
	switch {
	case l.End.IsZero() && (l.Start.IsZero() || !l.Start.After(at)):
		return "infinite", nil
	case l.End.IsZero():
		return "", fmt.Errorf("its lifetime starts %s with no end, and EOS lifetimes are `infinite` or `<start> <end>`: render it again once it has started (--at), or give it an end in aokeyd's key source", fmtTime(l.Start))
	}
	return eosTime(l.Start) + " " + eosTime(l.End), nil
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
			why[i] = fmt.Sprintf("EOS's BGP TCP-AO algorithms are aes-128-cmac-96, hmac-sha1-96 and (4.31.1F and later) hmac-sha-256, not %s", k.Algorithm)
		case k.SendID != k.RecvID:
			why[i] = fmt.Sprintf("an EOS shared secret has one key ID, used as both send-id and recv-id; this key's are %d and %d", k.SendID, k.RecvID)
		case !k.IncludeTCPOptions:
			why[i] = "EOS has no setting to exclude TCP options (include-tcp-options false)"
		case k.MACLen != tcpao.DefaultMACLen:
			why[i] = fmt.Sprintf("EOS's TCP-AO MACs are 96 bits (12 bytes); this key's MAC is %d bytes", k.MACLen)
		case !printable(k.Secret.Bytes()):
			why[i] = "EOS takes the secret as text; this key's bytes are not printable ASCII without spaces or quotes"
		default:
			_, aerr := eosLifetime(k.Accept.Widen(l.AcceptTolerance), r.o.At)
			_, serr := eosLifetime(k.Send, r.o.At)
			if err := errors.Join(aerr, serr); err != nil {
				why[i] = firstLine(err)
				break
			}
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
			recv, _ := eosLifetime(k.Accept.Widen(l.AcceptTolerance), r.o.At) // checked with the key
			send, _ := eosLifetime(k.Send, r.o.At)
			// `secret ID 0 TEXT ...` takes the word after the type as
			// the secret: the placeholder is a line whose first word is
			// no EOS command, which EOS's parser refuses ("% Invalid
			// input"), leaving the profile without the secret.
			lines = append(lines, fmt.Sprintf("      ! aokeyd key %s\n      %s", k.Name,
				r.notRendered(fmt.Sprintf("secret %d 0 %s receive-lifetime %s transmit-lifetime %s",
					k.SendID, r.secret(k, func(b []byte) string { return string(b) }), recv, send))))
		}
	}
	if len(lines) == 0 {
		r.refuse("", "EOS can take none of the chain's keys: no shared-secret profile or neighbor is rendered")
	}
	for _, f := range r.refused {
		if f.Key == "" {
			r.printf("! REFUSED: %s\n", f.Reason)
			continue
		}
		r.printf("! REFUSED key %s: %s\n", f.Key, f.Reason)
	}
	if len(lines) == 0 {
		return
	}
	r.printf("! EOS reads these lifetimes as UTC (no local-time keyword).\n")
	r.placeholderNote("!", "EOS")
	r.printf("management security\n   session shared-secret profile %s\n", l.Chain)
	for _, s := range lines {
		r.printf("%s\n", s)
	}
	r.printf("!\nrouter bgp <asn>\n")
	if l.VRF != "" {
		// A VRF peer: the neighbor under the VRF of that name.
		r.printf("   vrf %s\n      neighbor %s password shared-secret profile %s algorithm %s\n", l.VRF, r.local(), l.Chain, eosAlgorithm(alg))
	} else {
		r.printf("   neighbor %s password shared-secret profile %s algorithm %s\n", r.local(), l.Chain, eosAlgorithm(alg))
	}
}

// firstLine is err's first line (errors.Join puts one error a line).
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

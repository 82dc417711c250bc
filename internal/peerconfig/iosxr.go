package peerconfig

import (
	"fmt"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

const iosxrDoc = "Cisco IOS XR System Security Configuration Guide, Implementing Keychain Management (key chain: key-string, cryptographic-algorithm, send-lifetime, accept-lifetime, accept-tolerance; tcp ao keychain: key SendID ReceiveID) and BGP `neighbor ... ao KEYCHAIN include-tcp-options`; send-id/recv-id semantics: https://cisco.com/c/en/us/td/docs/routers/ios/config/17-x/ip-routing/b-ip-routing/m-iri-tcp-ao.html"

// iosxrAlgorithm is IOS-XR's cryptographic-algorithm for a with a 12-byte
// MAC, "" when none is documented for TCP-AO: the values hmac-sha1-96 and
// aes-128-cmac-96 of Cisco-IOS-XR-um-key-chain-cfg, as XR routers write
// them in their configuration (TestVendorAlgorithmKeywords).
func iosxrAlgorithm(a tcpao.Algorithm) string {
	switch a {
	case tcpao.HMACSHA1:
		return "HMAC-SHA1-96"
	case tcpao.CMACAES128:
		return "AES-128-CMAC-96"
	}
	return ""
}

// IOS-XR's key-chain lifetimes take the years 1993 to 2035.
var (
	iosxrFirst = time.Date(1993, 1, 1, 0, 0, 0, 0, time.UTC)
	iosxrLast  = time.Date(2035, 12, 31, 23, 59, 59, 0, time.UTC)
)

// iosxrTime is IOS-XR's lifetime instant: hh:mm:ss month day year.
func iosxrTime(t time.Time) string {
	t = t.UTC()
	return fmt.Sprintf("%s %s %02d %d", t.Format("15:04:05"), strings.ToLower(t.Month().String()), t.Day(), t.Year())
}

// iosxrLifetime is l in IOS-XR's form. A start before 1993 (or none: the
// key is valid from the beginning) is 1993's first second, the same
// lifetime to any router clock after it; an instant after 2035 cannot be
// written, and is an error naming what to do.
func iosxrLifetime(l keystore.Lifetime) (string, error) {
	switch {
	case l.Start.After(iosxrLast):
		return "", fmt.Errorf("its lifetime starts %s, after 2035, and IOS-XR's key-chain lifetimes end with 2035: render it again closer to that time", fmtTime(l.Start))
	case l.End.After(iosxrLast):
		return "", fmt.Errorf("its lifetime ends %s, after 2035, and IOS-XR's key-chain lifetimes end with 2035: give the key an end before 2036, or none (infinite), in aokeyd's key source", fmtTime(l.End))
	}
	start := l.Start
	if start.Before(iosxrFirst) {
		start = iosxrFirst
	}
	end := "infinite"
	if !l.End.IsZero() {
		end = iosxrTime(l.End)
	}
	return iosxrTime(start) + " " + end, nil
}

// iosxr renders the key chain, the tcp ao keychain with the IDs and the
// BGP neighbor's ao statement. IOS-XR wants identical send and accept
// lifetimes: both are the key's send-lifetime, and the key chain's
// accept-tolerance covers how much earlier and later aokeyd accepts.
// include-tcp-options is one setting per neighbor: the key sent with now
// decides it, keys that differ are refused.
func (r *renderer) iosxr() {
	r.header("!", iosxrDoc)
	l := r.l
	// Per-key checks first; the neighbor's include-tcp-options then comes
	// from the usable key sent with at the instant.
	algs := make([]string, len(l.Keys))
	usable := make([]bool, len(l.Keys))
	why := make([]string, len(l.Keys))
	for i, k := range l.Keys {
		algs[i] = iosxrAlgorithm(k.Algorithm)
		switch {
		case algs[i] == "":
			why[i] = fmt.Sprintf("IOS-XR's key-chain model lists hmac-sha-256, but its TCP-AO documentation gives only HMAC-SHA1-96 and AES-128-CMAC-96 the 12-byte MAC TCP-AO uses; %s is not rendered", k.Algorithm)
		case k.MACLen != tcpao.DefaultMACLen:
			why[i] = fmt.Sprintf("IOS-XR's TCP-AO algorithms have 12-byte MACs; this key's MAC is %d bytes", k.MACLen)
		case !printable(k.Secret.Bytes()):
			why[i] = "IOS-XR takes key-string as text; this key's bytes are not printable ASCII without spaces or quotes"
		default:
			if _, err := iosxrLifetime(k.Send); err != nil {
				why[i] = err.Error()
				break
			}
			usable[i] = true
		}
	}
	inc := false
	if s := l.shared(r.o.At, usable); s >= 0 {
		inc = l.Keys[s].IncludeTCPOptions
	}
	var tol time.Duration
	infinite := false
	type xrKey struct {
		k   Key
		id  int
		alg string
	}
	var keys []xrKey
	for i, k := range l.Keys {
		switch {
		case !usable[i]:
			r.refuse(k.Name, "%s", why[i])
			continue
		case k.IncludeTCPOptions != inc:
			r.refuse(k.Name, "include-tcp-options is one setting per IOS-XR neighbor (%t, from the key sent with at %s); this key has %t",
				inc, fmtTime(r.o.At), k.IncludeTCPOptions)
			continue
		}
		// How much wider aokeyd's accept window is than the send window.
		switch {
		case k.Accept.Start.IsZero() && !k.Send.Start.IsZero(), k.Accept.End.IsZero() && !k.Send.End.IsZero():
			infinite = true
		default:
			if d := k.Send.Start.Sub(k.Accept.Start); !k.Send.Start.IsZero() && d > tol {
				tol = d
			}
			if d := k.Accept.End.Sub(k.Send.End); !k.Send.End.IsZero() && d > tol {
				tol = d
			}
		}
		keys = append(keys, xrKey{k, i + 1, algs[i]})
	}
	tol += l.AcceptTolerance
	if len(keys) == 0 {
		r.refuse("", "IOS-XR can take none of the chain's keys: no key chain or neighbor ao statement is rendered (an ao statement with no key would drop the session)")
	}
	for _, f := range r.refused {
		if f.Key == "" {
			r.printf("! REFUSED: %s\n", f.Reason)
			continue
		}
		r.printf("! REFUSED key %s: %s\n", f.Key, f.Reason)
	}
	if len(keys) == 0 {
		return
	}
	r.printf("! IOS-XR lifetimes are in the router's clock zone: these are UTC (clock timezone UTC, or convert).\n")
	r.placeholderNote("!", "IOS-XR")
	r.printf("key chain %s\n", l.Chain)
	switch {
	case infinite:
		r.printf(" accept-tolerance infinite\n")
	case tol > 0:
		r.printf(" accept-tolerance %d\n", int64((tol+time.Second-1)/time.Second))
	}
	for _, x := range keys {
		r.printf(" key %d\n", x.id)
		r.printf("  ! aokeyd key %s\n", x.k.Name)
		// `key-string clear TEXT` takes the text as the key, whatever
		// it holds: the placeholder is a line whose first word is no
		// IOS-XR command, which XR's parser refuses ("% Invalid input
		// detected"), leaving the key without a key-string.
		r.printf("  %s\n", r.notRendered("key-string clear "+r.secret(x.k, func(b []byte) string { return string(b) })))
		r.printf("  cryptographic-algorithm %s\n", x.alg)
		life, _ := iosxrLifetime(x.k.Send) // checked with the key
		r.printf("  send-lifetime %s\n", life)
		r.printf("  accept-lifetime %s\n", life)
		r.printf(" !\n")
	}
	r.printf("!\ntcp ao\n keychain %s\n", l.Chain)
	for _, x := range keys {
		r.printf("  key %d SendID %d ReceiveID %d\n", x.id, x.k.SendID, x.k.RecvID)
	}
	opt := "disable"
	if inc {
		opt = "enable"
	}
	r.printf(" !\n!\nrouter bgp <asn>\n")
	if l.VRF != "" {
		// A VRF peer: the neighbor under the VRF of that name.
		r.printf(" vrf %s\n  neighbor %s\n   ao %s include-tcp-options %s\n  !\n !\n!\n", l.VRF, r.local(), l.Chain, opt)
		return
	}
	r.printf(" neighbor %s\n  ao %s include-tcp-options %s\n !\n!\n", r.local(), l.Chain, opt)
}

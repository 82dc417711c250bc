package peerconfig

import (
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestVendorAlgorithmKeywords: every algorithm keyword aokeyd renders for
// IOS-XR and Junos is one the vendor's own model enumerates. IOS-XR's used
// to be HMAC-SHA-1-96, which the model does not have (its value is
// hmac-sha1-96; XR routers show it as HMAC-SHA1-96).
func TestVendorAlgorithmKeywords(t *testing.T) {
	for _, tc := range []struct {
		target Target
		render func(tcpao.Algorithm) string
		fold   bool // the CLI keyword is the model's value in any case
		// source of the values below
		source string
		values []string
	}{
		{IOSXR, iosxrAlgorithm, true,
			// Cisco-IOS-XR-um-key-chain-cfg, key chains/chain/keys/key/
			// cryptographic-algorithm (XR 7.x and 24.x), as Cisco's
			// netascode IOS-XR key_chain data model lists it.
			"Cisco-IOS-XR-um-key-chain-cfg cryptographic-algorithm",
			[]string{"aes-128-cmac-96", "hmac-md5", "hmac-sha-256", "hmac-sha1-12", "hmac-sha1-20", "hmac-sha1-96", "md5", "sha-1"}},
		{Junos, junosAlgorithm, false,
			// Junos OS authentication-key-chains key ao-attribute
			// cryptographic-algorithm (junosDoc).
			"Junos ao-attribute cryptographic-algorithm",
			[]string{"hmac-sha-1-96", "aes-128-cmac-96"}},
	} {
		rendered := 0
		for _, a := range tcpao.Algorithms {
			kw := tc.render(a)
			if kw == "" {
				continue
			}
			rendered++
			v := kw
			if tc.fold {
				v = strings.ToLower(kw)
			}
			if !slices.Contains(tc.values, v) {
				t.Errorf("%s: %s renders as %q, which %s does not enumerate (%q)", tc.target, a, kw, tc.source, tc.values)
			}
		}
		if rendered == 0 {
			t.Errorf("%s: no algorithm rendered", tc.target)
		}
	}
}

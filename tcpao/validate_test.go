package tcpao

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// A key's validation error names the rule, never the length of the secret
// it was given: a secret's length is information about the secret.
func TestValidateHidesSecretLength(t *testing.T) {
	peer := netip.MustParsePrefix("192.0.2.1/32")
	for _, tc := range []struct {
		name string
		alg  Algorithm
		n    int
	}{
		{"too long", HMACSHA1, MaxKeyLen + 7},
		{"cmac not 16", CMACAES128, 23},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := Key{KeyRef: KeyRef{Peer: peer}, Algorithm: tc.alg, Secret: NewSecret(make([]byte, tc.n))}
			err := k.Validate()
			if !errors.Is(err, ErrKeyLength) {
				t.Fatalf("Validate = %v, want ErrKeyLength", err)
			}
			if strings.Contains(err.Error(), strconv.Itoa(tc.n)) {
				t.Fatalf("error %q states the secret's length %d", err, tc.n)
			}
		})
	}
}

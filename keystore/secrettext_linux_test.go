//go:build linux

package keystore

import (
	"testing"

	"github.com/aokeyd/aokeyd/internal/testkit"
)

// TestDecodersLeaveNoCopies decodes a key file and a Vault read response
// holding a secret 20 times each, wiping the input and the result as
// their owners do, and counts the secret's copies, raw and base64, in the
// process's memory (live or freed, see testkit.CountInMemory) before and
// after: decoding must leave none behind.
func TestDecodersLeaveNoCopies(t *testing.T) {
	raw, enc := testkit.SecretNeedles(t, secretsFile, "aokeyd-test-secret-foxtrot")
	withSecret := func(before, after string) []byte {
		b := append([]byte(before), enc.Head...)
		return append(append(b, enc.Tail...), after...)
	}
	decoders := []struct {
		name   string
		decode func() error
	}{
		{"file", func() error {
			data := withSecret("chains:\n  core:\n    peers: [192.0.2.1]\n    keys:\n      - name: k1\n        send_id: 1\n"+
				"        recv_id: 2\n        algorithm: hmac(sha256)\n        secret_b64: \"", "\"\n")
			defer clear(data)
			s, err := DecodeFile("k.yaml", data)
			if err == nil {
				s.Zero()
			}
			return err
		}},
		{"vault", func() error {
			body := withSecret(`{"request_id":"r","data":{"data":{"peers":["192.0.2.1"],"keys":[{"name":"k1","send_id":1,`+
				`"recv_id":2,"algorithm":"hmac(sha256)","secret_b64":"`, `"}]},"metadata":{"version":3}}}`)
			defer clear(body)
			c, err := DecodeVaultResponse("vault kv/c", "core", body)
			if err == nil {
				c.Zero()
			}
			return err
		}},
	}
	for _, d := range decoders {
		t.Run(d.name, func(t *testing.T) {
			count := func() [2]int {
				c, err := testkit.CountInMemory(raw, enc)
				if err != nil {
					t.Fatal(err)
				}
				return [2]int{c[0], c[1]}
			}
			before := count()
			for range 20 {
				if err := d.decode(); err != nil {
					t.Fatal(err)
				}
			}
			after := count()
			t.Logf("copies of the secret (raw, base64): %v before 20 decodes, %v after", before, after)
			if after[0] > before[0] || after[1] > before[1] {
				t.Errorf("decoding left copies of the secret: %v (raw, base64) before 20 decodes, %v after", before, after)
			}
		})
	}
}

package keystore

import (
	"strings"
	"testing"
)

// A chain may hold a TCP-MD5 password for its peers, with or without
// TCP-AO keys; it is validated like a key's secret and never shown.
func TestChainMD5Password(t *testing.T) {
	const pw = "s3cret-Md5!"
	for _, tc := range []struct {
		name, doc string
		field     string // the field a refusal names; "" when accepted
		keys      int
	}{
		{"md5 only", `chains:
  edge:
    peers: [192.0.2.2]
    md5: {secret_b64: "` + b64(pw) + `"}
`, "", 0},
		{"md5 beside ao keys", `chains:
  edge:
    peers: [192.0.2.2]
    md5: {secret_hex: "` + hexs(pw) + `"}
    keys:
      - {name: k1, send_id: 1, recv_id: 2, algorithm: hmac(sha256), secret_b64: "` + b64("0123456789abcdef") + `"}
`, "", 1},
		{"space in password", `chains:
  edge:
    peers: [192.0.2.2]
    md5: {secret_b64: "` + b64("has space") + `"}
`, "md5.secret", 0},
		{"quote in password", `chains:
  edge:
    peers: [192.0.2.2]
    md5: {secret_b64: "` + b64(`a"b`) + `"}
`, "md5.secret", 0},
		{"too long", `chains:
  edge:
    peers: [192.0.2.2]
    md5: {secret_b64: "` + b64(strings.Repeat("p", 81)) + `"}
`, "md5.secret", 0},
		{"no peers", `chains:
  edge:
    md5: {secret_b64: "` + b64(pw) + `"}
`, "peers", 0},
		{"unknown field", `chains:
  edge:
    peers: [192.0.2.2]
    md5: {secret_b64: "` + b64(pw) + `", password: x}
`, "chains.edge.md5: unknown field (its name is not shown); allowed here: secret_b64, secret_hex, revoked", 0},
		{"both encodings", `chains:
  edge:
    peers: [192.0.2.2]
    md5: {secret_b64: "` + b64(pw) + `", secret_hex: "` + hexs(pw) + `"}
`, "md5.secret", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := DecodeFile("keys.yaml", []byte(tc.doc))
			if tc.field != "" {
				if err == nil {
					t.Fatal("accepted")
				}
				msg := err.Error()
				if !strings.Contains(msg, tc.field) {
					t.Errorf("error %q does not name %s", msg, tc.field)
				}
				for _, leak := range []string{pw, "has space", `a"b`, "81", "11 "} {
					if strings.Contains(msg, leak) {
						t.Errorf("error %q shows %q", msg, leak)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := snap.Chains["edge"]
			if c.MD5 == nil || string(c.MD5.Secret.Bytes()) != pw || len(c.MD5.Peers) != 1 || len(c.Keys) != tc.keys {
				t.Fatalf("chain %+v", c)
			}
			if !strings.Contains(c.MD5.Source, "keys.yaml") {
				t.Errorf("source %q", c.MD5.Source)
			}
			cl := c.Clone()
			c.Zero()
			if string(cl.MD5.Secret.Bytes()) != pw {
				t.Fatal("clone shares the password's bytes")
			}
			for _, b := range c.MD5.Secret.Bytes() {
				if b != 0 {
					t.Fatal("Zero left the password")
				}
			}
		})
	}
}

// The chain's version changes with its password.
func TestChainMD5Digest(t *testing.T) {
	doc := func(pw string) []byte {
		return []byte("chains:\n  edge:\n    peers: [192.0.2.2]\n    md5: {secret_b64: \"" + b64(pw) + "\"}\n")
	}
	a, err := DecodeFile("k", doc("one-password"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeFile("k", doc("two-password"))
	if err != nil {
		t.Fatal(err)
	}
	if chainDigest(a.Chains["edge"]) == chainDigest(b.Chains["edge"]) {
		t.Fatal("a changed password keeps the chain's digest")
	}
}

// A Vault chain document's md5 password is decoded from the masked
// document: its text never goes through the JSON decoder.
func TestVaultChainMD5Masked(t *testing.T) {
	pw := "vault-md5-pw"
	doc := []byte(`{"peers":["192.0.2.2"],"md5":{"secret_b64":"` + b64(pw) + `"},"keys":[]}`)
	spans := jsonSpans(doc)
	if _, ok := spans[jsonSlot{md5Slot, "secret_b64"}]; !ok {
		t.Fatalf("spans %v: the md5 password is not masked", spans)
	}
	c, err := DecodeVaultChain("vault kv/aokeyd/chains/edge", "edge", doc)
	if err != nil {
		t.Fatal(err)
	}
	if c.MD5 == nil || string(c.MD5.Secret.Bytes()) != pw {
		t.Fatalf("md5 %+v", c.MD5)
	}
}

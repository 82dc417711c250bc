package keystore

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestDocsExampleIsMirrored decodes the two routers' files and router A's
// Vault document from docs/keys.md and checks that they mirror each other.
func TestDocsExampleIsMirrored(t *testing.T) {
	raw, err := os.ReadFile("../docs/keys.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	block := func(after, lang string) string {
		i := strings.Index(doc, after)
		if i < 0 {
			t.Fatalf("docs/keys.md lacks %q", after)
		}
		m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(doc[i:])
		if m == nil {
			t.Fatalf("no %s block after %q", lang, after)
		}
		return m[1]
	}
	a, err := DecodeFile("router-a", []byte(block("**Router A —", "yaml")))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Zero()
	b, err := DecodeFile("router-b", []byte(block("**Router B —", "yaml")))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Zero()
	if len(a.Rejected())+len(b.Rejected()) != 0 {
		t.Fatalf("rejected: %v %v", a.Rejected(), b.Rejected())
	}
	if errs := CheckMirrorSnapshots(a, b); len(errs) != 0 {
		t.Fatalf("docs example is not mirrored: %v", errs)
	}
	v, err := DecodeVaultChain("vault doc", "core", []byte(block("**The same in Vault**", "json")))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Zero()
	for _, k := range a.Chains["core"].Keys {
		vk, ok := v.Key(k.Name)
		if !ok || !vk.Secret.Equal(k.Secret) || vk.SendID != k.SendID || vk.RecvID != k.RecvID || vk.SendLifetime != k.SendLifetime {
			t.Errorf("Vault document differs from router A's file for key %s", k.Name)
		}
	}
}

func TestCheckMirror(t *testing.T) {
	sec := loadSecrets(t)
	local := MKT{Name: "k", SendID: 1, RecvID: 101, Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte(sec[0])), IncludeTCPOptions: true}
	remote := MKT{Name: "k", SendID: 101, RecvID: 1, Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte(sec[0])), MACLen: 12, IncludeTCPOptions: true}
	if err := CheckMirror(local, remote); err != nil {
		t.Fatalf("mirrored pair: %v", err)
	}
	tests := []struct {
		name string
		mut  func(m *MKT)
		want string
	}{
		{"same orientation", func(m *MKT) { m.SendID, m.RecvID = 1, 101 }, "local send_id 1 != remote recv_id 101"},
		{"recv mismatch", func(m *MKT) { m.SendID = 7 }, "local recv_id 101 != remote send_id 7"},
		{"algorithm", func(m *MKT) { m.Algorithm = tcpao.HMACSHA1 }, "algorithm"},
		{"secret", func(m *MKT) { m.Secret = tcpao.NewSecret([]byte(sec[1])) }, "secrets differ"},
		{"maclen", func(m *MKT) { m.MACLen = 16 }, "maclen 12 != 16"},
		{"options", func(m *MKT) { m.IncludeTCPOptions = false }, "tcp_options"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := remote.Clone()
			tc.mut(&r)
			err := CheckMirror(local, r)
			if !errors.Is(err, ErrMirror) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrMirror with %q", err, tc.want)
			}
			noSecret(t, err.Error())
		})
	}
}

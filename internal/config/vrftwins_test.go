package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/keystore"
)

// TestVRFTwinsNeedASpeakerThatSeparatesThem: one neighbor address bound
// in two VRFs is two peers; gobgpd keys its neighbors by address alone,
// so with it Check refuses the policy, naming the binding, its line, the
// other VRF and the fix; with FRR the same policy is fine.
func TestVRFTwinsNeedASpeakerThatSeparatesThem(t *testing.T) {
	pol := "version: 1\nkey_chains:\n  - name: red\n  - name: blue\npeers:\n  - {neighbor: 10.0.0.2, vrf: red, key_chain: red}\n  - {neighbor: 10.0.0.2, vrf: blue, key_chain: blue}\n"
	for _, c := range []struct {
		speaker string
		refused bool
	}{{"speaker:\n  type: gobgp\n", true}, {"speaker:\n  type: frr\n", false}} {
		dir := t.TempDir()
		write := func(name, text string) {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write("p.yaml", pol)
		write("k.yaml", "chains: {}\n")
		write("aokeyd.yaml", speakerBase+c.speaker)
		got := Check(context.Background(), filepath.Join(dir, "aokeyd.yaml"), CheckOptions{SkipKeySource: true})
		var twin *keystore.FieldError
		found := false
		for _, p := range got.Problems {
			if errors.As(p, &twin) && twin.Field == "peers[1].vrf" {
				found = true
				if !errors.Is(p, keystore.ErrInvalid) || twin.Line != 7 || !strings.Contains(p.Error(), `vrf "red"`) || !strings.Contains(p.Error(), "FRR") {
					t.Errorf("%s: %v (line %d), want the binding at line 7 named with vrf red and the fix", c.speaker, p, twin.Line)
				}
			}
		}
		if found != c.refused {
			t.Errorf("%s: problems %v, refused %t, want %t", c.speaker, got.Problems, found, c.refused)
		}
	}
}

package keystore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// docSource serves key files from a list of documents, one per read.
type docSource struct {
	docs []string
	i    int
}

func (s *docSource) Name() string { return "docs" }

func (s *docSource) Read(context.Context) (*Snapshot, error) {
	doc := s.docs[min(s.i, len(s.docs)-1)]
	s.i++
	snap, err := DecodeFile("keys.yaml", []byte(doc))
	if err != nil {
		return nil, err
	}
	for _, c := range snap.Chains { // a new version on every read
		c.Version = uint64(s.i)
	}
	return snap, nil
}

func (s *docSource) Revoke(context.Context, string, string) error { return nil }

func TestCacheHoldsWhatAReadLoses(t *testing.T) {
	sec := loadSecrets(t)
	k := func(name string, id int, extra ...string) string {
		s := fmt.Sprintf("{name: %s, send_id: %d, recv_id: %d, algorithm: hmac(sha256), secret_b64: %q", name, id, id+1, b64(sec[id%len(sec)]))
		for _, e := range extra {
			s += ", " + e
		}
		return s + "}"
	}
	bad := func(name string, id int) string {
		return fmt.Sprintf("{name: %s, send_id: %d, recv_id: %d, algorithm: hmac(md5), secret_b64: %q}", name, id, id+1, b64(sec[0]))
	}
	file := func(chains ...string) string {
		return "chains:\n" + strings.Join(chains, "")
	}
	chain := func(name string, keys ...string) string {
		return fmt.Sprintf("  %s:\n    peers: [192.0.2.2]\n    keys: [%s]\n", name, strings.Join(keys, ", "))
	}
	md5chain := func(name string, keys ...string) string {
		return fmt.Sprintf("  %s:\n    peers: [192.0.2.2]\n    md5: {secret_b64: %q}\n    keys: [%s]\n", name, b64("md5-Chain-pw"), strings.Join(keys, ", "))
	}
	type hold struct {
		what, reason, field string
		lastGood            bool
	}
	tests := []struct {
		name  string
		docs  []string
		bound []string // nil: every chain
		// after the last read
		keys  map[string][]string // chain -> key names
		holds []hold
	}{
		{name: "only key rejected keeps its last good version",
			docs: []string{file(chain("core", k("k1", 1))), file(chain("core", bad("k1", 1)))},
			keys: map[string][]string{"core": {"k1"}}, holds: []hold{{"core/k1", "key-rejected", "algorithm", true}}},
		{name: "newest key rejected, the older stays valid",
			docs: []string{file(chain("core", k("k0", 1), k("k1", 3))), file(chain("core", k("k0", 1), bad("k1", 3)))},
			keys: map[string][]string{"core": {"k0", "k1"}}, holds: []hold{{"core/k1", "key-rejected", "algorithm", true}}},
		{name: "chain emptied",
			docs: []string{file(chain("core", k("k1", 1))), file(chain("core"))},
			keys: map[string][]string{"core": {"k1"}}, holds: []hold{{"core", "no-usable-key", "", true}}},
		{name: "bound chain renamed",
			docs: []string{file(chain("core", k("k1", 1))), file(chain("core2", k("k1", 1)))},
			keys: map[string][]string{"core": {"k1"}, "core2": {"k1"}}, holds: []hold{{"core", "chain-missing", "", true}}},
		{name: "unbound chain removed leaves",
			docs:  []string{file(chain("core", k("k1", 1)), chain("old", k("o1", 7))), file(chain("core", k("k1", 1)))},
			bound: []string{"core"},
			keys:  map[string][]string{"core": {"k1"}}},
		{name: "key removed validly while another remains leaves",
			docs: []string{file(chain("core", k("k0", 1), k("k1", 3))), file(chain("core", k("k1", 3)))},
			keys: map[string][]string{"core": {"k1"}}},
		{name: "key revoked in the source is not held",
			docs: []string{file(chain("core", k("k1", 1))), file(chain("core", k("k1", 1, "revoked: true")))},
			keys: map[string][]string{"core": {"k1"}}},
		{name: "an entry without a usable name may stand in for a vanished key",
			docs: []string{file(chain("core", k("k0", 1), k("k1", 3))), file(chain("core", k("k0", 1), "{send_id: 3}"))},
			keys: map[string][]string{"core": {"k0", "k1"}}, holds: []hold{{"core/k1", "key-rejected", "name", true}}},
		{name: "first read already bad: recorded without a last good version",
			docs: []string{file(chain("core", k("k0", 1), bad("k1", 3)))},
			keys: map[string][]string{"core": {"k0"}}, holds: []hold{{"core/k1", "key-rejected", "algorithm", false}}},
		{name: "first read: empty chain",
			docs: []string{file(chain("core"), chain("other", k("o1", 7)))},
			keys: map[string][]string{"core": nil, "other": {"o1"}}, holds: []hold{{"core", "no-usable-key", "", false}}},
		{name: "source fixed: the hold ends",
			docs: []string{file(chain("core", k("k1", 1))), file(chain("core", bad("k1", 1))), file(chain("core", k("k1", 5)))},
			keys: map[string][]string{"core": {"k1"}}},
		{name: "a chain of TCP-MD5 peers without TCP-AO keys is not an emptied one",
			docs: []string{file(md5chain("core"))},
			keys: map[string][]string{"core": nil}},
		{name: "TCP-AO keys removed from a chain that keeps its TCP-MD5 password leave",
			docs: []string{file(md5chain("core", k("k1", 1))), file(md5chain("core"))},
			keys: map[string][]string{"core": nil}},
		{name: "a TCP-MD5 chain gone keeps its last good version",
			docs:  []string{file(md5chain("core"), chain("other", k("o1", 7))), file(chain("other", k("o1", 7)))},
			bound: []string{"core"},
			keys:  map[string][]string{"core": nil, "other": {"o1"}}, holds: []hold{{"core", "chain-missing", "", true}}},
		{name: "hold survives further bad reads",
			docs: []string{file(chain("core", k("k1", 1))), file(chain("core")), file(chain("core")), file(chain("core"))},
			keys: map[string][]string{"core": {"k1"}}, holds: []hold{{"core", "no-usable-key", "", true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := CacheOptions{Logger: logger(t)}
			if tc.bound != nil {
				o.Bound = func(c string) bool { return slices.Contains(tc.bound, c) }
			}
			c := NewCache(&docSource{docs: tc.docs}, o)
			defer c.Close()
			for range tc.docs {
				if _, err := c.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			s := c.Current()
			defer s.Zero()
			got := map[string][]string{}
			for n, ch := range s.Chains {
				got[n] = nil
				for _, m := range ch.Keys {
					got[n] = append(got[n], m.Name)
				}
				slices.Sort(got[n])
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.keys) {
				t.Errorf("chains %v, want %v", got, tc.keys)
			}
			var hs []hold
			for _, h := range s.Held {
				// The field's own name: its path is chains.core.keys[N].FIELD.
				hs = append(hs, hold{h.What(), h.Reason.String(), h.Field[strings.LastIndexByte(h.Field, '.')+1:], h.LastGood})
				noSecret(t, h.String())
			}
			if !slices.Equal(hs, tc.holds) {
				t.Errorf("holds %+v, want %+v", hs, tc.holds)
			}
			if st := c.Status(); len(st.Held) != len(tc.holds) {
				t.Errorf("status holds %v, want %d", st.Held, len(tc.holds))
			}
			for _, h := range tc.holds {
				chainName, _, _ := strings.Cut(h.what, "/")
				if s.Degraded(chainName) == h.lastGood {
					t.Errorf("Degraded(%s) = %t with a hold whose last good version kept is %t", chainName, !h.lastGood, h.lastGood)
				}
			}
		})
	}
}

package peerconfig

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/golden"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// lifetimeLink is the golden chain's first key three times, with one ID
// for both directions (so that EOS can take them) and the lifetimes the
// targets disagree on: always valid, a start with no end still to come,
// and an end after 2035.
func lifetimeLink(t *testing.T) Link {
	_, l := fixture(t)
	base := l.Keys[0]
	mk := func(name string, id uint8, life keystore.Lifetime) Key {
		k := base
		k.Name, k.SendID, k.RecvID, k.Send, k.Accept = name, id, id, life, life
		return k
	}
	l.AcceptTolerance = 0
	l.Keys = []Key{
		mk("always", 7, keystore.Lifetime{}),
		mk("start-only", 8, keystore.Lifetime{Start: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)}),
		mk("ends-2040", 9, keystore.Lifetime{Start: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)}),
	}
	return l
}

// TestGoldenLifetimes: every target's rendering of lifetimeLink, and what
// each refuses instead of rendering a value it does not take: IOS-XR's
// key-chain years end with 2035; EOS has `infinite` or `<start> <end>`,
// no start without an end.
func TestGoldenLifetimes(t *testing.T) {
	l := lifetimeLink(t)
	refuses := map[Target][]string{
		IOSXR: {"ends-2040"},
		EOS:   {"start-only"},
		GoBGP: {""},
	}
	forbidden := map[Target][]string{
		IOSXR: {" 2040", " 1970", "2036", "2037"},
		EOS:   {"01/01/2027 00:00:00 infinite", "01/01/1970"},
	}
	for _, target := range Targets {
		t.Run(string(target), func(t *testing.T) {
			var out bytes.Buffer
			refused, err := Render(&out, target, l, Options{At: at})
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, r := range refused {
				keys = append(keys, r.Key)
			}
			if !slices.Equal(keys, refuses[target]) {
				t.Errorf("refused %q, want %q", keys, refuses[target])
			}
			// The configuration itself, comments left out.
			var conf []string
			for _, line := range strings.Split(out.String(), "\n") {
				if s := strings.TrimSpace(line); !strings.HasPrefix(s, "!") && !strings.HasPrefix(s, "#") {
					conf = append(conf, line)
				}
			}
			for _, f := range forbidden[target] {
				if strings.Contains(strings.Join(conf, "\n"), f) {
					t.Errorf("rendered %q, which %s does not take:\n%s", f, target, out.String())
				}
			}
			golden.Check(t, "testdata/lifetimes/"+string(target)+".golden", out.String())
		})
	}
}

// TestRefusals: each value a target cannot take is refused with a reason
// that says what to do, and the rest of the chain is still rendered.
func TestRefusals(t *testing.T) {
	_, base := fixture(t)
	cases := []struct {
		name   string
		target Target
		edit   func(l *Link)
		at     time.Time
		key    string
		reason string
	}{
		{"iosxr start after 2035", IOSXR, func(l *Link) {
			l.Keys[0].Send.Start = time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
			l.Keys[0].Send.End = time.Time{}
		},
			at, "2026-10", "render it again closer to that time"},
		{"iosxr end after 2035", IOSXR, func(l *Link) { l.Keys[0].Send.End = time.Date(2037, 1, 1, 0, 0, 0, 0, time.UTC) },
			at, "2026-10", "give the key an end before 2036"},
		{"eos start-only still to come", EOS, func(l *Link) {
			l.Keys = l.Keys[:1]
			l.Keys[0].SendID, l.Keys[0].RecvID = 7, 7
			l.Keys[0].Send = keystore.Lifetime{Start: at.Add(time.Hour)}
		}, at, "2026-10", "render it again once it has started"},
		{"bird every key deprecated", BIRD, func(l *Link) {
			l.Keys = l.Keys[:1]
			l.Keys[0].Send = keystore.Lifetime{Start: at.Add(-48 * time.Hour), End: at.Add(-time.Hour)}
			l.Keys[0].Accept = keystore.Lifetime{Start: at.Add(-48 * time.Hour), End: at.Add(time.Hour)}
		}, at, "", "No usable TCP-AO key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := base
			l.Keys = slices.Clone(base.Keys)
			c.edit(&l)
			var out bytes.Buffer
			refused, err := Render(&out, c.target, l, Options{At: c.at})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(refused, func(r Refusal) bool { return r.Key == c.key })
			if i < 0 || !strings.Contains(refused[i].Reason, c.reason) {
				t.Fatalf("refusals %+v: want key %q refused with %q", refused, c.key, c.reason)
			}
			if !strings.Contains(out.String(), "REFUSED") {
				t.Errorf("the output does not say what was refused:\n%s", out.String())
			}
		})
	}
}

// TestAokeydAlgorithmsOnLinux72: every algorithm aokeyd offers is one Linux
// 7.2 and later accept, and a rendering for a Linux far end (BIRD, gobgp,
// aokeyd) warns of a key whose algorithm they refuse.
func TestAokeydAlgorithmsOnLinux72(t *testing.T) {
	for _, a := range tcpao.Algorithms {
		if !slices.Contains(linux72Algorithms, a) {
			t.Errorf("aokeyd offers %s, which Linux 7.2 refuses", a)
		}
	}
	_, l := fixture(t)
	l.Keys = l.Keys[:1]
	l.Keys[0].Algorithm = "hmac(sha512)" // BIRD offers it; Linux 7.2 does not
	for _, target := range Targets {
		var out bytes.Buffer
		if _, err := Render(&out, target, l, Options{At: at}); err != nil {
			t.Fatal(err)
		}
		linux := target == BIRD || target == GoBGP || target == Aokeyd
		if got := strings.Contains(out.String(), "Linux 7.2 and later refuse"); got != linux {
			t.Errorf("%s: warns of Linux 7.2: %v, want %v", target, got, linux)
		}
	}
}

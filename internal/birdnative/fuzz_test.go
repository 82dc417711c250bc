package birdnative

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/tcpao"
)

// FuzzParseFile: a neighbor's include file is read back at each pass and
// may have been edited by hand: any bytes parse without a panic, and what
// parses renders and parses again to the same keys.
func FuzzParseFile(f *testing.F) {
	f.Add(render([]bird.Key{{SendID: 1, RecvID: 101, Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte("0123456789abcdef")), Preferred: true}}, false))
	f.Add([]byte("key { send id 300; recv id 1; secret hex:zz; algorithm hmac sha1; };"))
	f.Add([]byte(fileHeader + disabledBody))
	f.Add([]byte("key { send id 1; recv id 2; secret hex:" + strings.Repeat("ab", 100) + "; algorithm hmac sha1; };"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ks, err := parseFile(b)
		if err != nil {
			return
		}
		defer zeroKeys(ks)
		again, err := parseFile(render(ks, false))
		if err != nil || len(again) != len(ks) {
			t.Fatalf("round trip: %v, %d keys then %d", err, len(ks), len(again))
		}
		defer zeroKeys(again)
		for i := range ks {
			if again[i].SendID != ks[i].SendID || again[i].RecvID != ks[i].RecvID || again[i].Algorithm != ks[i].Algorithm ||
				again[i].Preferred != ks[i].Preferred || again[i].Deprecated != ks[i].Deprecated || !bytes.Equal(again[i].Secret.Bytes(), ks[i].Secret.Bytes()) {
				t.Fatalf("key %d changed in a round trip", i)
			}
		}
	})
}

// keyLineRE is the expression keyLines matches by hand.
var keyLineRE = regexp.MustCompile(`key \{ send id (\d+); recv id (\d+); secret hex:([0-9a-f]+); algorithm ([a-z0-9 ]+);( preferred;)?( deprecated;)? \};`)

// FuzzKeyLinesAsRegexp: keyLines finds what keyLineRE's FindAllSubmatch
// finds, group by group, in any bytes.
func FuzzKeyLinesAsRegexp(f *testing.F) {
	f.Add(render([]bird.Key{{SendID: 1, RecvID: 101, Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret([]byte("0123456789abcdef")), Preferred: true},
		{SendID: 2, RecvID: 102, Algorithm: tcpao.CMACAES128, Secret: tcpao.NewSecret([]byte("0123456789abcdef")), Deprecated: true}}, false))
	f.Add([]byte("key { send id key { send id 1; recv id 2; secret hex:ab; algorithm hmac sha1; preferred; deprecated; };"))
	f.Add([]byte("key { send id 1; recv id 2; secret hex:AB; algorithm hmac sha1; };key { send id 3; recv id 4; secret hex:ab; algorithm x; preferred; };"))
	f.Add([]byte("key { send id 1; recv id 2; secret hex:ab; algorithm ; };"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := keyLines(b), keyLineRE.FindAllSubmatch(b, -1)
		if len(got) != len(want) {
			t.Fatalf("%d lines, the expression %d", len(got), len(want))
		}
		for i := range want {
			for g := range want[i] {
				if !bytes.Equal(got[i][g], want[i][g]) || (got[i][g] == nil) != (want[i][g] == nil) {
					t.Fatalf("line %d group %d: %q, the expression %q", i, g, got[i][g], want[i][g])
				}
			}
		}
	})
}

package early

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/tcpao"
)

var testCheck = strings.Repeat("ab", len(tcpao.Fingerprint{}))

// recordReqs are two requests: one held in a VRF, one rolling in the
// default VRF.
func recordReqs() []Request {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	pk := earlyKeys(t0)
	return []Request{
		{Peer: peer.KeyOf(netip.MustParseAddr("2001:db8::2"), "red"), Key: KeyOf(pk, 2), Asked: t0, Held: true},
		{Peer: peer.KeyOf(netip.MustParseAddr("192.0.2.2"), ""), Key: KeyOf(pk, 1), Asked: t0.Add(time.Minute),
			Session: Session{Inode: 4711, Local: netip.MustParseAddrPort("192.0.2.1:179"), Remote: netip.MustParseAddrPort("192.0.2.2:50123")}},
	}
}

func sameRequests(a, b []Request) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Peer != y.Peer || !x.Key.Same(y.Key) || !x.Key.Start.Equal(y.Key.Start) || !x.Asked.Equal(y.Asked) || x.Held != y.Held || x.Session != y.Session {
			return false
		}
	}
	return true
}

// What Encode writes Decode reads back, in peer order, with the check
// value; the peer is peer.Key's text; no secret is in it.
func TestRecordRoundTrip(t *testing.T) {
	reqs := recordReqs()
	b, err := Encode(reqs, testCheck)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"peer": "192.0.2.2"`, `"peer": "2001:db8::2 vrf red"`, `"state": "held"`, `"state": "rolling"`,
		`"remote": "192.0.2.2:50123"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("record lacks %s:\n%s", want, b)
		}
	}
	for _, name := range []string{"k2", "k3"} {
		secret := []byte("early-desired-" + name)
		if bytes.Contains(b, secret) || strings.Contains(string(b), hex.EncodeToString(secret)) {
			t.Errorf("the record holds %s's secret", name)
		}
	}
	got, check, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{reqs[1], reqs[0]} // peer order: IPv4 first
	if check != testCheck || !sameRequests(got, want) {
		t.Errorf("Decode: %+v check %q, want %+v check %q", got, check, want, testCheck)
	}
	if _, err := Encode(append(reqs, reqs[0]), testCheck); err == nil {
		t.Error("Encode took two requests for one peer")
	}
	if _, err := Encode([]Request{{Peer: reqs[0].Peer, Key: reqs[0].Key, Session: Session{Inode: 1}}}, testCheck); err == nil {
		t.Error("Encode took a session without its ends")
	}
	if _, err := Encode([]Request{{Key: reqs[0].Key}}, testCheck); err == nil {
		t.Error("Encode took a request without a peer")
	}
}

// Decode refuses what Encode does not write.
func TestRecordDecodeRefuses(t *testing.T) {
	good, err := Encode(recordReqs(), testCheck)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new string }{
		{"not JSON", `"version"`, `version`},
		{"another version", `"version": 1`, `"version": 2`},
		{"no check value", `"check": "` + testCheck + `"`, `"check": ""`},
		{"a bad peer", `"peer": "192.0.2.2"`, `"peer": "192.0.2.2 vrf "`},
		{"a duplicate peer", `"peer": "192.0.2.2"`, `"peer": "2001:db8::2 vrf red"`},
		{"the same peer, spelt otherwise", `"peer": "2001:db8::2 vrf red"`, `"peer": "::ffff:192.0.2.2"`},
		{"no key name", `"key": "k2"`, `"key": ""`},
		{"an unknown algorithm", `"algorithm": "hmac(sha256)"`, `"algorithm": "md5"`},
		{"a bad tcp_options", `"tcp_options": "exclude"`, `"tcp_options": "both"`},
		{"a short fingerprint", `"fingerprint": "`, `"fingerprint": "00`},
		{"an unknown state", `"state": "held"`, `"state": "ended"`},
		{"a session without its inode", `"inode": 4711`, `"inode": 0`},
		{"a session without an end", `"remote": "192.0.2.2:50123"`, `"remote": ""`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tc.old, tc.new, 1)
			if bad == string(good) {
				t.Fatalf("%q is not in the record", tc.old)
			}
			if reqs, _, err := Decode([]byte(bad)); err == nil {
				t.Errorf("Decode took it: %+v", reqs)
			}
		})
	}
	if reqs, _, err := Decode([]byte(`{"version":1,"check":"` + testCheck + `","rolls":[]}`)); err != nil || len(reqs) != 0 {
		t.Errorf("an empty record: %+v %v", reqs, err)
	}
}

// FuzzDecode: the record is read from the state directory at every
// start, and a disk or a hand may have changed it: any bytes decode
// without a panic, and what decodes encodes and decodes again to the same
// requests and check value.
func FuzzDecode(f *testing.F) {
	good, err := Encode(recordReqs(), testCheck)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"version":1,"check":"` + testCheck + `","rolls":null}`))
	f.Add([]byte(`{"version":1,"check":"` + testCheck + `","rolls":[{"peer":"::ffff:10.0.0.1 vrf a vrf b","chain":"c","key":"k",` +
		`"algorithm":"cmac(aes128)","tcp_options":"include","fingerprint":"` + testCheck + `","asked":"0001-01-01T00:00:00+23:59","state":"held"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		reqs, check, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := Encode(reqs, check)
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, check2, err := Decode(enc)
		if err != nil || check2 != check || !sameRequests(again, reqs) {
			t.Fatalf("round trip: %v, check %q then %q, %+v then %+v", err, check, check2, reqs, again)
		}
	})
}

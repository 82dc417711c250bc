package tcpao

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
)

// The secret is chosen so that every rendering of its bytes would be
// recognisable: as text, as hex, as base64 or as a Go byte list.
func TestNoRenderingShowsTheSecret(t *testing.T) {
	raw := []byte("hunter2-very-secret-key!")
	s := NewSecret(raw)
	k := Key{KeyRef: KeyRef{Peer: netip.MustParsePrefix("192.0.2.1/32"), SendID: 1, RecvID: 2}, Algorithm: HMACSHA256, Secret: s}
	ki := KeyInfo{KeyRef: k.KeyRef, Algorithm: HMACSHA256, Fingerprint: s.Fingerprint()}
	forbidden := []string{
		string(raw), fmt.Sprintf("%x", raw), fmt.Sprintf("%X", raw), fmt.Sprintf("%v", raw)[1:20],
		"aHVudGVyMi", // base64 prefix
	}
	render := map[string]func() string{}
	for name, v := range map[string]any{"Secret": s, "Key": k, "KeyInfo": ki, "*Key": &k} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			render[name+" "+verb] = func() string { return fmt.Sprintf(verb, v) }
		}
		render[name+" json"] = func() string {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("json.Marshal(%s): %v", name, err)
			}
			return string(b)
		}
		render[name+" slog json"] = func() string {
			var b bytes.Buffer
			slog.New(slog.NewJSONHandler(&b, nil)).Info("m", "v", v)
			return b.String()
		}
		render[name+" slog text"] = func() string {
			var b bytes.Buffer
			slog.New(slog.NewTextHandler(&b, nil)).Info("m", "v", v)
			return b.String()
		}
	}
	for name, f := range render {
		out := f()
		for _, bad := range forbidden {
			if strings.Contains(out, bad) {
				t.Errorf("%s renders the secret: %s", name, out)
			}
		}
	}
	if !strings.Contains(fmt.Sprint(s), "redacted") {
		t.Errorf("Secret prints %q, want a redaction marker", fmt.Sprint(s))
	}
}

// Not even a secret's length is shown: secrets of 16 and 24 bytes render
// the same in every form, alone and inside a Key.
func TestRenderingsHideTheLength(t *testing.T) {
	a, b := NewSecret(bytes.Repeat([]byte{0x5a}, 16)), NewSecret(bytes.Repeat([]byte{0x5a}, 24))
	ref := KeyRef{Peer: netip.MustParsePrefix("192.0.2.1/32"), SendID: 1, RecvID: 2}
	ka, kb := Key{KeyRef: ref, Algorithm: HMACSHA256, Secret: a}, Key{KeyRef: ref, Algorithm: HMACSHA256, Secret: b}
	render := map[string]func(v any) string{
		"json": func(v any) string { j, _ := json.Marshal(v); return string(j) },
		"slog json": func(v any) string {
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "v", v)
			return buf.String()
		},
		"slog text": func(v any) string {
			var buf bytes.Buffer
			slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "v", v)
			return buf.String()
		},
		"MarshalText": func(v any) string {
			if m, ok := v.(interface{ MarshalText() ([]byte, error) }); ok {
				out, _ := m.MarshalText()
				return string(out)
			}
			return ""
		},
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
		render[verb] = func(v any) string { return fmt.Sprintf(verb, v) }
	}
	for name, f := range render {
		for _, pair := range [][2]any{{a, b}, {ka, kb}, {&ka, &kb}} {
			if x, y := f(pair[0]), f(pair[1]); x != y {
				t.Errorf("%s of a %T shows the secret's length: %q for 16 bytes, %q for 24", name, pair[0], x, y)
			}
		}
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestSecretZero(t *testing.T) {
	s := NewSecret([]byte{1, 2, 3})
	c := s.Clone()
	s.Zero()
	if !bytes.Equal(s.Bytes(), []byte{0, 0, 0}) {
		t.Errorf("Zero left %v", s.Bytes())
	}
	if c.Equal(s) || !bytes.Equal(c.Bytes(), []byte{1, 2, 3}) {
		t.Error("Clone shares bytes with the original")
	}
	// The fingerprint is of the bytes the Secret was made with, and clones
	// carry it.
	if c.Fingerprint() != NewSecret([]byte{1, 2, 3}).Fingerprint() || c.Fingerprint() == NewSecret([]byte{1, 2, 4}).Fingerprint() {
		t.Error("Clone's fingerprint is not that of its bytes")
	}
}

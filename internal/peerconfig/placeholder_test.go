package peerconfig

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// junosTokens splits a Junos CLI line into its words, a double-quoted
// string being one word (quotes kept).
func junosTokens(line string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, c := range line {
		switch {
		case c == '"':
			quoted = !quoted
			cur.WriteRune(c)
		case (c == ' ' || c == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// junosSecretLoads reports whether line is a Junos `set` command that sets
// a key's secret: `set ... secret VALUE` with VALUE one word (a quoted
// string or a word without spaces), which Junos takes as the secret.
func junosSecretLoads(line string) bool {
	w := junosTokens(line)
	if len(w) < 2 || w[0] != "set" {
		return false
	}
	for i, x := range w {
		if x == "secret" {
			return i == len(w)-2
		}
	}
	return false
}

// The forms in which each target takes a secret, for the lines of a
// rendering: each returns the lines (or values) the far end would load as
// a key's secret.
var secretForms = map[Target]func(t *testing.T, out string) []string{
	// `set ... secret VALUE`: a quoted string, spaces and all, or one word.
	Junos: func(_ *testing.T, out string) []string { return linesWhere(out, junosSecretLoads) },
	// `key-string [clear|password] TEXT`: XR takes the text after the
	// keyword as the key (IOS takes the rest of the line).
	IOSXR: func(_ *testing.T, out string) []string {
		return linesWhere(out, func(line string) bool {
			f := strings.Fields(line)
			return len(f) >= 2 && f[0] == "key-string"
		})
	},
	// `secret ID TYPE TEXT receive-lifetime ... transmit-lifetime ...`.
	EOS: func(_ *testing.T, out string) []string {
		return linesWhere(out, func(line string) bool {
			f := strings.Fields(line)
			return len(f) >= 4 && f[0] == "secret"
		})
	},
	// A `secret` (TCP-AO key) or `password` (TCP-MD5) statement whose value
	// is a BIRD bytestring: a quoted text, or hex bytes.
	BIRD: func(_ *testing.T, out string) []string {
		return linesWhere(out, func(line string) bool {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				return false
			}
			for _, stmt := range strings.FieldsFunc(line, func(r rune) bool { return r == ';' || r == '{' || r == '}' }) {
				word, value, _ := strings.Cut(strings.TrimSpace(stmt), " ")
				value = strings.TrimSpace(value)
				if (word == "secret" || word == "password") &&
					(len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' || birdHex.MatchString(value)) {
					return true
				}
			}
			return false
		})
	},
	// The far end's key file, as a second aokeyd reads it: it loads.
	Aokeyd: keyFileLoads,
	GoBGP:  keyFileLoads,
	// RFC 8177 key-string: any keystring, or a hexadecimal-string that is
	// a yang:hex-string.
	YANG: func(t *testing.T, out string) []string {
		var doc struct {
			KeyChains struct {
				KeyChain []struct {
					Key []struct {
						KeyString map[string]string `json:"key-string"`
					} `json:"key"`
				} `json:"key-chain"`
			} `json:"ietf-key-chain:key-chains"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("yang: the rendering is not JSON: %v\n%s", err, out)
		}
		var taken []string
		for _, c := range doc.KeyChains.KeyChain {
			for _, k := range c.Key {
				for name, v := range k.KeyString {
					if name == "keystring" || name == "hexadecimal-string" && yangHexString.MatchString(v) {
						taken = append(taken, name+": "+v)
					}
				}
			}
		}
		return taken
	},
}

var (
	birdHex       = regexp.MustCompile(`^(hex:)?[0-9a-fA-F]{2}(:?[0-9a-fA-F]{2})*$`)
	yangHexString = regexp.MustCompile(`^([0-9a-fA-F]{2}(:[0-9a-fA-F]{2})*)?$`) // ietf-yang-types hex-string
)

func linesWhere(out string, takes func(line string) bool) []string {
	var taken []string
	for _, line := range strings.Split(out, "\n") {
		if takes(line) {
			taken = append(taken, line)
		}
	}
	return taken
}

// keyFileLoads returns the key file of an aokeyd or gobgp rendering (the
// part under "# --- keys.yaml") when aokeyd loads it.
func keyFileLoads(t *testing.T, out string) []string {
	var file []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "# --- keys.yaml"):
			in = true
		case strings.HasPrefix(line, "# ---"):
			in = false
		case in:
			file = append(file, line)
		}
	}
	if len(file) == 0 {
		t.Fatalf("no key file in the rendering:\n%s", out)
	}
	if _, err := keystore.DecodeFile("far-keys.yaml", []byte(strings.Join(file, "\n"))); err != nil {
		return nil
	}
	return file
}

// TestPlaceholderRefused: on every target, a secret that is not rendered
// is a placeholder the far end refuses, never a value it would take as the
// secret, and every placeholder reads the same: SECRET-NOT-RENDERED:, the
// statement with the secret replaced by where the key source keeps it,
// and how to render it. The Junos placeholder used to be a quoted string
// (`secret "<secret: file:...>"`), IOS-XR's `key-string clear <secret:
// file:...>`, EOS's `secret 7 0 <secret: file:...> ...` and BIRD's TCP-MD5
// `password "<md5 password: ...>"`: each is a statement the vendor reads
// as a secret (BIRD's parser takes the last). The rendering with secrets is
// the control: each target's secret forms are found in it. Where the
// vendor's own parser is on the host, it reads the placeholder rendering
// and must stop at the placeholder: BIRD 2.17 and 3.1 (AOKEYD_BIRD_ROOT)
// and yanglint against ietf-key-chain (AOKEYD_YANGLINT, AOKEYD_YANG_DIR).
func TestPlaceholderRefused(t *testing.T) {
	_, base := fixture(t)
	// A chain every target renders: 2026-10 (hmac(sha1), sent with at
	// at) with one ID both ways (EOS) and TCP options included (EOS, BIRD).
	ao := base
	k := base.Keys[0]
	k.SendID, k.RecvID, k.IncludeTCPOptions = 7, 7, true
	ao.Keys = []Key{k}
	// A TCP-MD5 link: BIRD renders its password.
	md5 := ao
	md5.MD5, md5.HasMD5, md5.MD5Source = tcpao.NewSecret([]byte("md5-Secret.1")), true, "file keys.yaml:3"
	type link struct {
		name string
		l    Link
	}
	links := []link{{"ao", ao}}
	birdParse, yangLint := birdParser(t), yangLinter(t)
	for _, target := range Targets {
		ls := links
		if target == BIRD {
			ls = append(ls, link{"md5", md5})
		}
		for _, c := range ls {
			t.Run(string(target)+"/"+c.name, func(t *testing.T) {
				forms := secretForms[target]
				if forms == nil {
					t.Fatalf("no secret forms for target %s: add them to secretForms", target)
				}
				render := func(with bool) string {
					var out bytes.Buffer
					refused, err := Render(&out, target, c.l, Options{At: at, WithSecrets: with})
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range refused {
						if r.Key != "" || target != GoBGP { // GoBGP refuses the chain, and renders aokeyd's files
							t.Fatalf("refused: %v", refused)
						}
					}
					return out.String()
				}
				with, without := render(true), render(false)
				if len(forms(t, with)) == 0 {
					t.Fatalf("the rendering with secrets holds no secret in %s's forms (the check is not live):\n%s", target, with)
				}
				if taken := forms(t, without); len(taken) > 0 {
					t.Errorf("%s takes a placeholder as the secret: %q\n%s", target, taken, without)
				}
				placeholders := 0
				for _, line := range strings.Split(without, "\n") {
					i := strings.Index(line, "<secret: ")
					if i < 0 {
						i = strings.Index(line, "<md5 password: ")
					}
					if i < 0 {
						continue
					}
					placeholders++
					m := strings.Index(line, secretNotRendered+" ")
					if m < 0 || m > i || !strings.Contains(line[i:], "("+withSecretsHint+")") {
						t.Errorf("placeholder %q: want %q before it and (%s) after it", line, secretNotRendered, withSecretsHint)
					}
				}
				if placeholders == 0 {
					t.Errorf("no placeholder naming the key source:\n%s", without)
				}
				switch {
				case target == BIRD && birdParse != nil:
					if err := birdParse("with", birdConfig(c.l, with)); err != nil {
						t.Fatalf("BIRD refuses the rendering with secrets: %v", err)
					}
					conf := birdConfig(c.l, without)
					err := birdParse("placeholder", conf)
					if err == nil {
						t.Fatalf("BIRD's parser takes the placeholder:\n%s", conf)
					}
					if line := birdErrorLine(err, conf); !strings.Contains(line, secretNotRendered) {
						t.Errorf("BIRD's parser stops at %q, not at the placeholder: %v", line, err)
					}
					t.Logf("bird: %s placeholder refused: %v", c.name, err)
				case target == YANG && yangLint != nil:
					doc, _ := withoutModule(t, []byte(with), "ietf-tcp")
					if err := yangLint("with", doc); err != nil {
						t.Fatalf("yanglint refuses the rendering with secrets: %v", err)
					}
					doc, _ = withoutModule(t, []byte(without), "ietf-tcp")
					err := yangLint("placeholder", doc)
					if err == nil || !strings.Contains(err.Error(), "hexadecimal-string") {
						t.Fatalf("yanglint does not refuse the placeholder's hexadecimal-string: %v", err)
					}
					t.Logf("yang: placeholder refused: %v", err)
				}
			})
		}
	}
}

// birdErrorLine is the line of conf that BIRD's error err names
// ("FILE:LINE:COL syntax error ..."), "" when it names none.
func birdErrorLine(err error, conf string) string {
	m := regexp.MustCompile(`\.conf:(\d+):\d+ `).FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	n, _ := strconv.Atoi(m[1])
	lines := strings.Split(conf, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}

// TestNothingSwitchedOnWithoutKeys: when a target can take none of the
// chain's keys, the rendering is refused for the whole chain and holds no
// configuration at all: comments only. It used to switch TCP-AO on for the
// neighbor with an empty key chain (Junos authentication-algorithm ao,
// IOS-XR's ao statement with include-tcp-options disable where the keys
// include them, EOS's empty shared-secret profile).
func TestNothingSwitchedOnWithoutKeys(t *testing.T) {
	_, base := fixture(t)
	for _, target := range []Target{Junos, IOSXR, EOS} {
		t.Run(string(target), func(t *testing.T) {
			l := base
			l.Keys = nil
			for _, k := range base.Keys {
				k.Algorithm = "hmac(sha512)" // none of these targets has it
				k.IncludeTCPOptions = true
				l.Keys = append(l.Keys, k)
			}
			var out bytes.Buffer
			refused, err := Render(&out, target, l, Options{At: time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC)})
			if err != nil {
				t.Fatal(err)
			}
			chain := false
			for _, r := range refused {
				chain = chain || r.Key == ""
			}
			if !chain {
				t.Errorf("refusals %+v: none for the chain", refused)
			}
			c := "#"
			if target != Junos {
				c = "!"
			}
			for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
				if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, c) {
					t.Errorf("configuration line %q in a rendering with no key:\n%s", line, out.String())
				}
			}
		})
	}
}

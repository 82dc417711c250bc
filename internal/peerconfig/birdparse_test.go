package peerconfig

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestBIRDParse has BIRD 2.17's own parser (`bird -p -c`, from the guest
// root, run under chroot) read every --for bird rendering, with secrets,
// inside a minimal config: IPv4, IPv6 and VRF peers, each algorithm, and
// the preferred/deprecated combinations of a roll (one key; the next key
// installed ahead; the old one accept-only after the switch). A rendering
// BIRD would refuse at run time instead (every key deprecated) is refused
// by the renderer: TestRefusals. A config BIRD's parser refuses is refused
// here too (the parser is live). Both BIRD 2.17 and BIRD 3.1 parse each.
// AOKEYD_BIRD_ROOT is the guest root;
// `make renderings` sets it, and without it the test is skipped.
func TestBIRDParse(t *testing.T) {
	parse := birdParser(t)
	if parse == nil {
		t.Skip("AOKEYD_BIRD_ROOT not set (make renderings sets it)")
	}
	_, l := fixture(t)
	l.Keys[1].IncludeTCPOptions = true // BIRD always includes them
	v6 := l
	v6.Peer, v6.Local = "2001:db8::2", "2001:db8::1"
	vrf := l
	vrf.VRF = "red"
	cases := []struct {
		name string
		l    Link
		at   time.Time
	}{
		{"ipv4 one key (hmac sha1)", l, time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC)},
		{"ipv4 next key ahead (hmac sha256 preferred, sha1 deprecated)", l, at},
		{"ipv4 cmac aes128 after the roll", l, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)},
		{"ipv6", v6, at},
		{"vrf", vrf, at},
	}
	for _, c := range cases {
		var out bytes.Buffer
		refused, err := Render(&out, BIRD, c.l, Options{At: c.at, WithSecrets: true})
		if err != nil || len(refused) > 0 {
			t.Fatalf("%s: refused %v, err %v", c.name, refused, err)
		}
		conf := birdConfig(c.l, out.String())
		if err := parse("case", conf); err != nil {
			t.Errorf("%s: BIRD refuses the rendering: %v\n%s", c.name, err, conf)
			continue
		}
		t.Logf("bird: %s: parsed (%d keys)", c.name, strings.Count(out.String(), "\t\tkey {"))
	}
	// A TCP-MD5 link: its password, and its migration's TCP-AO block.
	md5 := l
	md5.MD5, md5.HasMD5, md5.MD5Source = tcpao.NewSecret([]byte("md5-Secret.1")), true, "test"
	for _, o := range []Options{{At: at, WithSecrets: true}, {At: at, WithSecrets: true, Migrate: true}} {
		var out bytes.Buffer
		if refused, err := Render(&out, BIRD, md5, o); err != nil || len(refused) > 0 {
			t.Fatalf("md5 migrate=%v: refused %v, err %v", o.Migrate, refused, err)
		}
		if err := parse("md5", birdConfig(md5, out.String())); err != nil {
			t.Errorf("md5 migrate=%v: BIRD refuses the rendering: %v\n%s", o.Migrate, err, out.String())
		} else {
			t.Logf("bird: md5 migrate=%v: parsed", o.Migrate)
		}
	}
	// Each algorithm alone.
	for _, a := range []tcpao.Algorithm{tcpao.HMACSHA1, tcpao.HMACSHA256, tcpao.CMACAES128} {
		one := l
		k := l.Keys[0]
		k.Algorithm, k.Send, k.Accept = a, keystore.Lifetime{}, keystore.Lifetime{}
		one.Keys = []Key{k}
		var out bytes.Buffer
		if _, err := Render(&out, BIRD, one, Options{At: at, WithSecrets: true}); err != nil {
			t.Fatal(err)
		}
		if err := parse("alg", birdConfig(one, out.String())); err != nil {
			t.Errorf("%s: BIRD refuses the rendering: %v", a, err)
		} else {
			t.Logf("bird: algorithm %s: parsed", a)
		}
	}
	if err := parse("bad", birdConfig(l, "\tauthentication ao;\n\tkeys { key { send id 1; recv id 2; secret \"x\"; algorithm hmac sha7; }; };\n")); err == nil {
		t.Errorf("BIRD's parser accepts an unknown algorithm: the parser is not live")
	}
}

// birdConfig wraps a rendering (the lines inside `protocol bgp`) in a
// minimal BIRD config: the far end's BGP protocol for the link.
func birdConfig(l Link, rendering string) string {
	ch := "ipv4"
	if strings.Contains(l.Local, ":") {
		ch = "ipv6"
	}
	return fmt.Sprintf("router id 192.0.2.2;\nprotocol device {}\nprotocol bgp far {\n\tlocal %s as 65002;\n\tneighbor %s as 65001;\n\t%s { import all; export none; };\n%s}\n",
		l.Peer, l.Local, ch, rendering)
}

// birdParser returns a function that has both BIRD lines Debian trixie
// serves read conf with their own parser (`bird -p -c`, under chroot in
// the guest root AOKEYD_BIRD_ROOT): nil when both take it, else what the
// first that refuses it says, or a warning it prints ("assuming"). It is
// nil when AOKEYD_BIRD_ROOT is not set (`make renderings` sets it).
func birdParser(t *testing.T) func(name, conf string) error {
	root := os.Getenv("AOKEYD_BIRD_ROOT")
	if root == "" {
		return nil
	}
	return func(name, conf string) error {
		dir, err := os.MkdirTemp(filepath.Join(root, "tmp"), "aokeyd-birdparse-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		f := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(f, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		// bird2 (2.17) and bird3 (3.1, extracted to /opt/bird3 in the
		// guest root).
		for _, bin := range []string{"bird", "/opt/bird3/usr/sbin/bird"} {
			out, err := exec.Command("chroot", root, bin, "-p", "-c", strings.TrimPrefix(f, root)).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%s: %v: %s", bin, err, strings.TrimSpace(string(out)))
			}
			if strings.Contains(string(out), "assuming") {
				return fmt.Errorf("%s warns: %s", bin, strings.TrimSpace(string(out))) // e.g. "Missing authentication option, assuming MD5"
			}
		}
		return nil
	}
}

package config

import (
	"testing"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/tcpao"
)

// TestSpeakerKindsAreWhole: every registry entry names itself, checks its
// sections, finds its process by a setting the reference documents, and
// has a port; no two share a name; the fields of its sections and its pid
// file setting are settings aokeyd.yaml(5) documents.
func TestSpeakerKindsAreWhole(t *testing.T) {
	docs := settingDocs()
	names := map[string]bool{}
	for _, k := range SpeakerKinds {
		if k.Name == "" || k.Title == "" || k.check == nil || k.process == nil || k.Port == 0 || len(k.Sections) == 0 {
			t.Errorf("entry %+v is not whole", k.Kind)
		}
		if names[k.Name] {
			t.Errorf("two entries named %s", k.Name)
		}
		names[k.Name] = true
		for _, f := range append([]string{k.PIDFileSetting}, func() (fs []string) {
			for _, s := range k.Sections {
				fs = append(fs, s.Field)
			}
			return
		}()...) {
			if _, ok := docs[f]; !ok {
				t.Errorf("%s: %q is no setting of aokeyd.yaml(5)", k.Name, f)
			}
		}
		if got, ok := SpeakerKindNamed(k.Name); !ok || got != k {
			t.Errorf("SpeakerKindNamed(%q) = %v, %t", k.Name, got, ok)
		}
	}
	if _, ok := SpeakerKindNamed("bird2"); ok {
		t.Error("a kind named bird2")
	}
}

// TestSpeakerProcessNamesItsSetting: each kind's process is found by its
// own section's settings, and an ambiguous process name's error names its
// own pid file setting, never another kind's.
func TestSpeakerProcessNamesItsSetting(t *testing.T) {
	for _, tt := range []struct {
		yaml string
		want Process
	}{
		{"", Process{Name: DefaultProcessName, Setting: "gobgp.pid_file"}},
		{"gobgp:\n  pid_file: /run/gobgpd.pid\n", Process{PIDFile: "/run/gobgpd.pid", Setting: "gobgp.pid_file"}},
		{"speaker:\n  type: frr\n", Process{PIDFile: DefaultFRRPIDFile, Name: DefaultFRRProcessName, Setting: "speaker.frr.pid_file"}},
		// A pathspace's pid file alone names its bgpd: never a scan.
		{"speaker:\n  type: frr\n  frr:\n    pathspace: red\n", Process{PIDFile: "/run/frr/red/bgpd.pid", Setting: "speaker.frr.pid_file"}},
		{"speaker:\n  type: bird\n", Process{UnixSocket: DefaultBirdControlSocket, Name: DefaultBirdProcessName, Setting: "speaker.bird.pid_file"}},
	} {
		c, err := Parse("", []byte(speakerBase+tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.SpeakerProcess(); got != tt.want {
			t.Errorf("%q: process %+v, want %+v", tt.yaml, got, tt.want)
		}
	}
}

// TestBirdCapsAgreeWithBird: what BIRD's registry entry says it cannot
// hold is what package bird, which writes BIRD's keys, refuses.
func TestBirdCapsAgreeWithBird(t *testing.T) {
	for _, mac := range []uint8{0, tcpao.DefaultMACLen, 4, 16} {
		for _, inc := range []bool{true, false} {
			caps := BirdKind.KeyProblem(mac, inc)
			own := bird.Check(tcpao.Key{Algorithm: tcpao.HMACSHA256, MACLen: mac, ExcludeOptions: !inc})
			if (caps == nil) != (own == nil) || caps != nil && caps.Error() != own.Error() {
				t.Errorf("MAC length %d, TCP options included %t: the registry says %v, package bird %v", mac, inc, caps, own)
			}
		}
	}
}

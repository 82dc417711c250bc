package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

const speakerBase = "key_source:\n  type: file\n  file:\n    path: k.yaml\npolicy:\n  path: p.yaml\n"

func TestSpeakerFRR(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want FRR
	}{
		{"defaults", "speaker:\n  type: frr\n", FRR{PIDFile: DefaultFRRPIDFile,
			ProcessName: DefaultFRRProcessName, PollInterval: Duration(DefaultFRRPollInterval)}},
		// FRR started with -N red (frrinit.sh start red, watchfrr -N red)
		// writes its pid files in /run/frr/red, whatever --vty_socket says.
		{"pathspace: FRR's pid file of that pathspace", "speaker:\n  type: frr\n  frr:\n    pathspace: red\n", FRR{Pathspace: "red",
			PIDFile: "/run/frr/red/bgpd.pid", ProcessName: DefaultFRRProcessName, PollInterval: Duration(DefaultFRRPollInterval)}},
		{"all set, relative paths resolved", "speaker:\n  type: frr\n  frr:\n    vty_socket: run/frr\n    pathspace: red\n    pid_file: bgpd.pid\n    process_name: bgpd\n    poll_interval: 250ms\n",
			FRR{VtySocket: "/etc/aokeyd/run/frr", Pathspace: "red", PIDFile: "/etc/aokeyd/bgpd.pid",
				ProcessName: "bgpd", PollInterval: Duration(250 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/etc/aokeyd/aokeyd.yaml", []byte(speakerBase+tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if c.SpeakerKind() != FRRKind || c.Speaker.FRR == nil || *c.Speaker.FRR != tt.want {
				t.Fatalf("speaker = %+v frr %+v, want frr %+v", c.Speaker, c.Speaker.FRR, tt.want)
			}
			if c.GoBGP != (GoBGP{}) {
				t.Errorf("gobgp = %+v, want untouched with an FRR speaker", c.GoBGP)
			}
		})
	}
}

func TestSpeakerDefaultIsGoBGP(t *testing.T) {
	c, err := Parse("aokeyd.yaml", []byte(speakerBase))
	if err != nil {
		t.Fatal(err)
	}
	if c.Speaker.Type != SpeakerGoBGP || c.SpeakerKind() != GoBGPKind || c.GoBGP.Address != DefaultGoBGPAddress || c.Speaker.API != GoBGPAPIAuto {
		t.Fatalf("speaker %+v gobgp %+v, want gobgp with its defaults", c.Speaker, c.GoBGP)
	}
}

func TestSpeakerErrors(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		line  int
		field string
		msg   string
	}{
		{"unknown type", "speaker:\n  type: bird2\n", 8, "speaker.type", "invalid value: want gobgp, frr or bird"},
		{"frr section with gobgp", "speaker:\n  type: gobgp\n  frr:\n    pid_file: /run/frr/bgpd.pid\n", 10, "speaker.frr", "only with speaker.type frr"},
		{"gobgp section with frr", "speaker:\n  type: frr\ngobgp:\n  address: 127.0.0.1:50051\n", 10, "gobgp", "only with speaker.type gobgp"},
		{"process path", "speaker:\n  type: frr\n  frr:\n    process_name: /usr/lib/frr/bgpd\n", 10, "speaker.frr.process_name", "not a path"},
		{"pathspace path", "speaker:\n  type: frr\n  frr:\n    pathspace: /run/x\n", 10, "speaker.frr.pathspace", "not a path"},
		{"poll too fast", "speaker:\n  type: frr\n  frr:\n    poll_interval: 10ms\n", 10, "speaker.frr.poll_interval", "out of range"},
		{"poll too slow", "speaker:\n  type: frr\n  frr:\n    poll_interval: 5m\n", 10, "speaker.frr.poll_interval", "out of range"},
		{"unknown gobgp api", "speaker:\n  type: gobgp\n  api: v5\n", 9, "speaker.api", "invalid value: want v3, v4 or auto"},
		{"api with frr", "speaker:\n  type: frr\n  api: v4\n", 9, "speaker.api", "only with speaker.type gobgp"},
		// Each other kind's section is named at its own field, whatever
		// the kind configured.
		{"api with bird", "speaker:\n  type: bird\n  api: v4\n", 9, "speaker.api", "set only with speaker.type gobgp (this config says bird)"},
		{"frr section with bird", "speaker:\n  type: bird\n  frr:\n    pid_file: /run/frr/bgpd.pid\n", 10, "speaker.frr", "set only with speaker.type frr (this config says bird)"},
		{"bird section with frr", "speaker:\n  type: frr\n  bird:\n    keys_dir: /etc/bird/aokeyd\n", 10, "speaker.bird", "set only with speaker.type bird (this config says frr)"},
		{"unknown frr field", "speaker:\n  type: frr\n  frr:\n    socket: /run/frr\n", 10, "speaker.frr", "unknown field (its name is not shown) in speaker.frr; allowed: vty_socket, pathspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("aokeyd.yaml", []byte(speakerBase+tt.yaml))
			var es keystore.FieldErrors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("Parse error %v, want keystore.FieldErrors", err)
			}
			e := es[0]
			if e.Line != tt.line || e.Field != tt.field || !strings.Contains(e.Error(), tt.msg) {
				t.Errorf("got %q (line %d, field %q), want line %d field %q containing %q", e.Error(), e.Line, e.Field, tt.line, tt.field, tt.msg)
			}
		})
	}
}

package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

func TestParseExample(t *testing.T) {
	c, err := Load("testdata/aokeyd.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := c.KeySource.File.Path, filepath.Join("testdata", "keys.yaml"); got != want {
		t.Errorf("key file = %q, want %q (relative to the config)", got, want)
	}
	if got, want := c.Policy.Path, filepath.Join("testdata", "policy.yaml"); got != want {
		t.Errorf("policy = %q, want %q", got, want)
	}
	if c.GoBGP.PIDFile != "/run/gobgpd.pid" || c.GoBGP.ProcessName != "" {
		t.Errorf("gobgp = %+v, want pid_file only", c.GoBGP)
	}
	if c.Control.Mode != 0o660 || c.Metrics.Listen != "127.0.0.1:9179" || !c.Metrics.Enabled() {
		t.Errorf("control/metrics = %+v %+v", c.Control, c.Metrics)
	}
	if time.Duration(c.KeySource.StaleAfter) != 10*time.Minute {
		t.Errorf("stale_after = %v", c.KeySource.StaleAfter)
	}
}

func TestDefaults(t *testing.T) {
	c, err := Parse("", []byte("key_source: {type: file, file: {path: /k.yaml}}\npolicy: {path: /p.yaml}\n"))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"control.socket", c.Control.Socket, DefaultControlSocket},
		{"metrics.listen", c.Metrics.Listen, DefaultMetricsListen},
		{"gobgp.address", c.GoBGP.Address, DefaultGoBGPAddress},
		{"gobgp.process_name", c.GoBGP.ProcessName, DefaultProcessName},
		{"log.format", c.Log.Format, DefaultLogFormat},
		{"log.level", c.Log.Level, DefaultLogLevel},
		{"key_source.refresh", c.KeySource.Refresh.String(), Duration(DefaultRefresh).String()},
		{"control.read_timeout", c.Control.ReadTimeout.String(), Duration(DefaultControlReadTimeout).String()},
		{"control.idle_timeout", c.Control.IdleTimeout.String(), Duration(DefaultControlIdleTimeout).String()},
		{"control.write_timeout", c.Control.WriteTimeout.String(), Duration(DefaultControlWriteTimeout).String()},
		{"control.max_connections", fmt.Sprint(c.Control.MaxConnections), fmt.Sprint(DefaultControlMaxConns)},
		{"control.admin_connections", fmt.Sprint(c.Control.AdminConnections), fmt.Sprint(DefaultControlAdminConns)},
		{"metrics.per_key", fmt.Sprint(c.Metrics.PerKey.On()), "false"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %q, want %q", ch.name, ch.got, ch.want)
		}
	}
	if c.Control.Mode != FileMode(DefaultControlMode) {
		t.Errorf("control.mode = %o", c.Control.Mode)
	}
}

func TestParseErrors(t *testing.T) {
	const base = "key_source:\n  type: file\n  file:\n    path: k.yaml\npolicy:\n  path: p.yaml\n"
	tests := []struct {
		name     string
		yaml     string
		line     int
		field    string
		sentinel error
		msg      string
	}{
		{"empty", "", 0, "", keystore.ErrSyntax, "empty config"},
		{"unknown top field", base + "metric:\n  listen: x\n", 7, "", keystore.ErrUnknownField, "unknown field (its name is not shown) in config; allowed: key_source, policy, speaker"},
		{"unknown nested field", base + "log:\n  format: text\n  colour: true\n", 9, "log", keystore.ErrUnknownField, "unknown field (its name is not shown) in log; allowed: format, level"},
		{"duplicate key", base + "log:\n  level: info\n  level: debug\n", 9, "", keystore.ErrDuplicate, "already defined"},
		{"wrong type", base + "kernel:\n  raise_optmem: maybe\n", 8, "", keystore.ErrSyntax, "cannot unmarshal !!str (not shown) into bool"},
		{"two documents", base + "---\nlog: {}\n", 7, "", keystore.ErrSyntax, "more than one YAML document"},
		{"bad keepalive probe", base + "kernel:\n  keepalive_probe: maybe\n", 8, "kernel.keepalive_probe", keystore.ErrInvalid, "want true or false"},
		{"bad duration", "key_source:\n  type: file\n  refresh: soon\n", 3, "", keystore.ErrSyntax, "not a duration (want e.g. 30s, 10m, 1d)"},
		{"bad mode", base + "control:\n  mode: rw\n", 8, "", keystore.ErrSyntax, "not a mode (want octal, e.g. 0660)"},
		{"no source type", "policy: {path: p}\n", 1, "key_source.type", keystore.ErrMissingField, "want file or vault"},
		{"bad source type", "key_source:\n  type: etcd\npolicy: {path: p}\n", 2, "key_source.type", keystore.ErrInvalid, "invalid value: want file or vault"},
		{"file without path", "key_source:\n  type: file\n  file: {}\npolicy: {path: p}\n", 3, "key_source.file.path", keystore.ErrMissingField, "key file"},
		{"vault with file section", "key_source:\n  type: vault\n  file:\n    path: x\npolicy: {path: p}\n", 4, "key_source.file", keystore.ErrInvalid, "only with type file"},
		{"approle without ids", "key_source:\n  type: vault\n  vault:\n    auth:\n      method: approle\npolicy: {path: p}\n", 5, "key_source.vault.auth.role_id_file", keystore.ErrMissingField, "approle"},
		{"bad auth method", "key_source:\n  type: vault\n  vault:\n    auth:\n      method: ldap\npolicy: {path: p}\n", 5, "key_source.vault.auth.method", keystore.ErrInvalid, "invalid value: want token or approle"},
		{"bad vault address", "key_source:\n  type: vault\n  vault:\n    address: vault:8200\npolicy: {path: p}\n", 4, "key_source.vault.address", keystore.ErrInvalid, "http(s) URL"},
		{"stale before refresh", "key_source:\n  type: file\n  refresh: 5m\n  stale_after: 1m\n  file: {path: k}\npolicy: {path: p}\n", 4, "key_source.stale_after", keystore.ErrInvalid, "shorter than refresh"},
		{"no policy", "key_source:\n  type: file\n  file: {path: k}\n", 1, "policy.path", keystore.ErrMissingField, "policy"},
		{"pid file and name", base + "gobgp:\n  pid_file: /run/g.pid\n  process_name: gobgpd\n", 9, "gobgp.process_name", keystore.ErrInvalid, "not both"},
		{"process path", base + "gobgp:\n  process_name: /usr/sbin/gobgpd\n", 8, "gobgp.process_name", keystore.ErrInvalid, "not a path"},
		{"bad gobgp address", base + "gobgp:\n  address: localhost\n", 8, "gobgp.address", keystore.ErrInvalid, "host:port"},
		{"mode for others", base + "control:\n  mode: \"0666\"\n", 8, "control.mode", keystore.ErrInvalid, "others"},
		{"bad admin group", base + "control:\n  admin_group: \"a b\"\n", 8, "control.admin_group", keystore.ErrInvalid, "not a group name"},
		{"short read timeout", base + "control:\n  read_timeout: 0.5s\n", 8, "control.read_timeout", keystore.ErrInvalid, "too short"},
		{"zero-ish idle timeout", base + "control:\n  idle_timeout: 1ms\n", 8, "control.idle_timeout", keystore.ErrInvalid, "too short"},
		{"too many connections", base + "control:\n  max_connections: 100000\n", 8, "control.max_connections", keystore.ErrInvalid, "out of range"},
		{"negative connections", base + "control:\n  max_connections: -1\n", 8, "control.max_connections", keystore.ErrInvalid, "out of range"},
		{"too many admin connections", base + "control:\n  admin_connections: 1025\n", 8, "control.admin_connections", keystore.ErrInvalid, "out of range"},
		{"negative admin connections", base + "control:\n  admin_connections: -1\n", 8, "control.admin_connections", keystore.ErrInvalid, "out of range"},
		{"unknown control field", base + "control:\n  admin_groups: x\n", 8, "control", keystore.ErrUnknownField, "unknown field (its name is not shown) in control; allowed: socket, group, admin_group"},
		{"bad metrics listen", base + "metrics:\n  listen: 9179\n", 8, "metrics.listen", keystore.ErrInvalid, "host:port"},
		{"bad metrics per_key", base + "metrics:\n  per_key: maybe\n", 8, "metrics.per_key", keystore.ErrInvalid, "invalid value: want true or false (true: the per-key series too"},
		{"metrics per_key a list", base + "metrics:\n  per_key: [true]\n", 8, "metrics.per_key", keystore.ErrInvalid, "want true or false"},
		{"unknown metrics field", base + "metrics:\n  perkey: true\n", 8, "metrics", keystore.ErrUnknownField, "in metrics; allowed: listen, per_key"},
		{"bad log format", base + "log:\n  format: xml\n", 8, "log.format", keystore.ErrInvalid, "invalid value: want text or json"},
		{"bad log level", base + "log:\n  level: loud\n", 8, "log.level", keystore.ErrInvalid, "invalid value: want debug, info, warn or error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("aokeyd.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			var es keystore.FieldErrors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v is not keystore.FieldErrors", err)
			}
			e := es[0]
			if e.Line != tt.line || e.Field != tt.field || !errors.Is(e, tt.sentinel) || !strings.Contains(e.Error(), tt.msg) {
				t.Errorf("got %q (line %d, field %q), want line %d field %q %v containing %q",
					e.Error(), e.Line, e.Field, tt.line, tt.field, tt.sentinel, tt.msg)
			}
			if !strings.HasPrefix(e.Error(), "aokeyd.yaml") {
				t.Errorf("error %q does not name the file", e.Error())
			}
		})
	}
}

func TestParseReportsAllProblems(t *testing.T) {
	_, err := Parse("c.yaml", []byte("key_source:\n  type: file\n  file: {}\nlog:\n  format: xml\n  level: loud\n"))
	var es keystore.FieldErrors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v", err)
	}
	var fields []string
	for _, e := range es {
		fields = append(fields, e.Field)
	}
	want := "key_source.file.path policy.path log.format log.level"
	if got := strings.Join(fields, " "); got != want {
		t.Errorf("fields = %q, want %q", got, want)
	}
}

func TestDefaultConfigAndDemoPolicy(t *testing.T) {
	c, err := Parse(DefaultPath, DefaultConfig())
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	if c.KeySource.Type != SourceFile || c.KeySource.File.Path != "/etc/aokeyd/keys.yaml" {
		t.Errorf("default key source = %+v", c.KeySource)
	}
	pol, err := policy.Parse("demo-policy.yaml", DemoPolicy())
	if err != nil {
		t.Fatalf("demo policy: %v", err)
	}
	snap, err := keystore.DecodeFile("default-keys.yaml", keystore.DefaultKeyFile())
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Zero()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	if ps := pol.Validate(snap, now, 10*365*24*time.Hour); len(ps) != 0 {
		t.Errorf("demo policy against the demo keys: %v", ps)
	}
	// The copies are independent.
	DefaultConfig()[0] = 'X'
	if DefaultConfig()[0] == 'X' {
		t.Error("DefaultConfig returns the embedded bytes themselves")
	}
}

func TestCheck(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("keys.yaml", string(keystore.DefaultKeyFile()))
	write("policy.yaml", string(DemoPolicy()))
	write("bad-policy.yaml", "version: 1\nkey_chains:\n  - name: demo\n  - name: gone\npeers:\n  - neighbor: 192.0.2.2\n    key_chain: demo\n  - neighbor: 192.0.2.9\n    key_chain: gone\n")
	good := write("good.yaml", "key_source: {type: file, file: {path: keys.yaml}}\npolicy: {path: policy.yaml}\n")
	badPol := write("badpol.yaml", "key_source: {type: file, file: {path: keys.yaml}}\npolicy: {path: bad-policy.yaml}\n")
	noKeys := write("nokeys.yaml", "key_source: {type: file, file: {path: missing.yaml}}\npolicy: {path: policy.yaml}\n")
	badGroup := write("badgroup.yaml", "key_source: {type: file, file: {path: keys.yaml}}\npolicy: {path: policy.yaml}\ncontrol: {group: no-such-group-aokeyd}\n")
	badAdmin := write("badadmin.yaml", "key_source: {type: file, file: {path: keys.yaml}}\npolicy: {path: policy.yaml}\ncontrol: {admin_group: no-such-group-aokeyd}\n")
	tests := []struct {
		name string
		path string
		skip bool
		want []string // substrings, one per problem
	}{
		{"good", good, false, nil},
		{"good, config only", good, true, nil},
		{"missing config", filepath.Join(dir, "nope.yaml"), false, []string{"nope.yaml: the configuration cannot be read: open: no such file"}},
		{"unknown source chain", badPol, false, []string{`bad-policy.yaml:4:11: key_chains[1].name: unknown key chain: source chain "gone"`}},
		{"unknown source chain, config only", badPol, true, nil},
		{"unreadable key file", noKeys, false, []string{"missing.yaml: the key file cannot be read: open: no such file"}},
		{"unknown group", badGroup, false, []string{"badgroup.yaml:3:18: control.group: invalid value: no such group on this machine"}},
		{"unknown admin group", badAdmin, false, []string{"badadmin.yaml:3:24: control.admin_group: invalid value: no such group on this machine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := Check(context.Background(), tt.path, CheckOptions{Now: now, SkipKeySource: tt.skip})
			defer ch.Snapshot.Zero()
			if len(ch.Problems) < len(tt.want) || (len(tt.want) == 0) != ch.OK() {
				t.Fatalf("problems = %v, want %d like %q", ch.Problems, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(ch.Problems[i].Error(), w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, ch.Problems[i], w)
				}
			}
		})
	}
}

// TestMetricsPerKey: metrics.per_key is true or false as YAML writes a
// bool (yaml.v3's spellings), false when unset; a reload that changes it
// needs a restart.
func TestMetricsPerKey(t *testing.T) {
	const base = "key_source: {type: file, file: {path: /k.yaml}}\npolicy: {path: /p.yaml}\n"
	tests := []struct {
		yaml string
		on   bool
	}{
		{"", false},
		{"metrics: {}\n", false},
		{"metrics:\n  per_key: false\n", false},
		{"metrics:\n  per_key: true\n", true},
		{"metrics:\n  listen: off\n  per_key: true\n", true},
	}
	for _, tt := range tests {
		c, err := Parse("aokeyd.yaml", []byte(base+tt.yaml))
		if err != nil {
			t.Errorf("%q: %v", tt.yaml, err)
			continue
		}
		if c.Metrics.PerKey.On() != tt.on {
			t.Errorf("%q: per_key %v, want %v", tt.yaml, c.Metrics.PerKey.On(), tt.on)
		}
	}
	off, _ := Parse("", []byte(base))
	on, _ := Parse("", []byte(base+"metrics: {per_key: true}\n"))
	if got := NeedRestart(off, on); !slices.Equal(got, []string{"metrics.per_key"}) {
		t.Errorf("NeedRestart = %q, want metrics.per_key", got)
	}
}

// kernel.keepalive_probe is on unless written false.
func TestKeepaliveProbeDefaultsOn(t *testing.T) {
	const base = "key_source:\n  type: file\n  file:\n    path: k.yaml\npolicy:\n  path: p.yaml\n"
	for _, tc := range []struct {
		yaml string
		on   bool
	}{{"", true}, {"kernel:\n  keepalive_probe: true\n", true}, {"kernel:\n  keepalive_probe: false\n", false}} {
		c, err := Parse("aokeyd.yaml", []byte(base+tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Kernel.KeepaliveProbe.On(); got != tc.on {
			t.Errorf("%q: keepalive_probe on = %t, want %t", tc.yaml, got, tc.on)
		}
	}
}

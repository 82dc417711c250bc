package config

import (
	"slices"
	"testing"
	"time"
)

// A reload names each setting of aokeyd.yaml that changed by its path in
// the file; the policy and the log level are what it applies, the rest
// waits for a restart.
func TestChanged(t *testing.T) {
	base := func() *Config {
		return &Config{File: "/etc/aokeyd/aokeyd.yaml",
			KeySource: KeySource{Type: SourceFile, Refresh: Duration(30 * time.Second), File: &FileSource{Path: "/etc/aokeyd/keys.yaml"}},
			Policy:    Policy{Path: "/etc/aokeyd/policy.yaml"}, Speaker: Speaker{Type: "gobgp"},
			Log: Log{Format: "text", Level: "info"}, Control: Control{Socket: "/run/aokeyd/control.sock", Mode: 0o660}}
	}
	for _, tc := range []struct {
		name    string
		edit    func(c *Config)
		changed []string
		restart []string
	}{
		{"nothing", func(*Config) {}, nil, nil},
		{"the file's name is no setting", func(c *Config) { c.File = "other.yaml" }, nil, nil},
		{"log level: applied", func(c *Config) { c.Log.Level = "debug" }, []string{"log.level"}, []string{}},
		{"policy: applied", func(c *Config) { c.Policy.Path = "/etc/aokeyd/p2.yaml" }, []string{"policy.path"}, []string{}},
		{"key file and refresh", func(c *Config) {
			c.KeySource.File.Path = "/srv/keys.yaml"
			c.KeySource.Refresh = Duration(time.Minute)
		}, []string{"key_source.refresh", "key_source.file.path"}, []string{"key_source.refresh", "key_source.file.path"}},
		{"key source to vault", func(c *Config) {
			c.KeySource.Type, c.KeySource.File = SourceVault, nil
			c.KeySource.Vault = &Vault{Address: "https://vault:8200"}
		}, []string{"key_source.type", "key_source.file", "key_source.vault"}, []string{"key_source.type", "key_source.file", "key_source.vault"}},
		{"speaker, log format, control mode, fleet", func(c *Config) {
			c.Speaker.Type, c.Log.Format, c.Control.Mode, c.Fleet = "frr", "json", 0o600, &Fleet{RouterID: "r1"}
		}, []string{"speaker.type", "control.mode", "log.format", "fleet"}, []string{"speaker.type", "control.mode", "log.format", "fleet"}},
		{"applied and not", func(c *Config) { c.Log.Level, c.Speaker.Type = "warn", "frr" }, []string{"speaker.type", "log.level"}, []string{"speaker.type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := base(), base()
			tc.edit(b)
			if got := Changed(a, b); !slices.Equal(got, tc.changed) {
				t.Errorf("Changed = %q, want %q", got, tc.changed)
			}
			if got := NeedRestart(a, b); len(got) != len(tc.restart) || !slices.Equal(got, tc.restart) {
				t.Errorf("NeedRestart = %q, want %q", got, tc.restart)
			}
		})
	}
}

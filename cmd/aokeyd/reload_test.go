package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/policy"
)

// fakeCore records what a reload does to the running core.
type fakeCore struct {
	policies  int
	refreshes int
	warnings  []string
}

func (f *fakeCore) SetPolicy(*policy.Policy)          { f.policies++ }
func (f *fakeCore) RefreshKeys(context.Context) error { f.refreshes++; return nil }
func (f *fakeCore) SetConfigWarnings(w []string)      { f.warnings = w }

// systemctl reload aokeyd (SIGHUP) applies the policy and the log level of
// a changed aokeyd.yaml, and names each other changed setting, which keeps
// its running value until a restart: a log line and a status warning
// each, gone once the file has the running value again. A bad file is
// refused and changes nothing.
func TestReloadAppliesOrNamesEachSetting(t *testing.T) {
	dir := t.TempDir()
	cfgPath := initTestConfig(t, dir)
	orig, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := os.ReadFile(filepath.Join(dir, "keys.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys2.yaml"), keys, 0o600); err != nil {
		t.Fatal(err)
	}
	running, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	log, err := newLogger(running.Log, logs)
	if err != nil {
		t.Fatal(err)
	}
	core := &fakeCore{}
	edit := func(old, new string) string { return strings.Replace(string(orig), old, new, 1) }
	for _, tc := range []struct {
		name     string
		yaml     string
		refused  bool
		debug    bool     // the log level is debug after the reload
		settings []string // named as needing a restart
	}{
		{name: "unchanged", yaml: string(orig)},
		{name: "log level: applied", yaml: edit("level: info", "level: debug"), debug: true},
		{name: "key file: named", yaml: edit("keys.yaml", "keys2.yaml"), settings: []string{"key_source.file.path"}},
		{name: "speaker: named", yaml: edit("address: 127.0.0.1:50051", "address: 127.0.0.1:50052"), settings: []string{"gobgp.address"}},
		{name: "several", yaml: edit("format: text\n  level: info", "format: json\n  level: debug"), debug: true, settings: []string{"log.format"}},
		{name: "bad: refused, the last state stays", yaml: edit("level: info", "level: loud"), refused: true, debug: true, settings: []string{"log.format"}},
		{name: "back as it was: the warnings go", yaml: string(orig)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cfgPath, []byte(tc.yaml), 0o640); err != nil {
				t.Fatal(err)
			}
			before, mark := core.policies, len(logs.String())
			reload(context.Background(), cfgPath, running, core, log)
			out := logs.String()[mark:]
			if applied := core.policies > before; applied == tc.refused {
				t.Fatalf("policy applied %v, want %v:\n%s", applied, !tc.refused, out)
			}
			if got := log.Enabled(context.Background(), -4); got != tc.debug {
				t.Errorf("debug logging %v, want %v:\n%s", got, tc.debug, out)
			}
			if tc.refused {
				if !strings.Contains(out, "reload refused") {
					t.Errorf("a refused reload does not say so:\n%s", out)
				}
			}
			var named []string
			for _, w := range core.warnings {
				s, _, _ := strings.Cut(strings.TrimPrefix(w, cfgPath+": "), " changed")
				named = append(named, s)
				if !strings.Contains(w, "systemctl restart aokeyd") {
					t.Errorf("warning %q does not say how", w)
				}
			}
			if !slices.Equal(named, tc.settings) {
				t.Errorf("status warns of %q, want %q", named, tc.settings)
			}
			for _, s := range tc.settings {
				if !tc.refused && !strings.Contains(out, "setting="+s) {
					t.Errorf("no log line names %s:\n%s", s, out)
				}
			}
			if tc.debug && !tc.refused && !strings.Contains(out, "applied=[log.level]") {
				t.Errorf("the reload's line does not name the level as applied:\n%s", out)
			}
		})
	}
}

// newLogger's logger has a level a reload sets; the loggers derived from
// it follow.
func TestSetLogLevel(t *testing.T) {
	var b bytes.Buffer
	log, err := newLogger(config.Log{Format: "json", Level: "warn"}, &b)
	if err != nil {
		t.Fatal(err)
	}
	sub := log.With("piece", "reconcile")
	sub.Info("hidden")
	if !setLogLevel(log, -4) || setLogLevel(log, -4) {
		t.Fatal("setLogLevel: want true once, then false (unchanged)")
	}
	sub.Debug("shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, `"msg":"shown"`) {
		t.Errorf("log %q: want the debug line after the level was set, not the info line before", s)
	}
}

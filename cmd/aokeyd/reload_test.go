package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
	"github.com/aokeyd/aokeyd/tcpao"
)

// fakeCore records what a reload does to the running core; with keys,
// RefreshKeys reads them as the daemon's does.
type fakeCore struct {
	policies  int
	refreshes int
	warnings  []string
	keys      *keystore.Cache
}

func (f *fakeCore) SetPolicy(*policy.Policy)     { f.policies++ }
func (f *fakeCore) SetConfigWarnings(w []string) { f.warnings = w }
func (f *fakeCore) RefreshKeys(ctx context.Context) error {
	f.refreshes++
	if f.keys == nil {
		return nil
	}
	_, err := f.keys.Refresh(ctx)
	return err
}

// acceptingHost is this machine with a kernel that accepts every TCP-AO
// algorithm (a host without TCP-AO refuses them all, and a reload checks
// the keys against it, as the start does), its process hardening and
// kernel probe passed.
func acceptingHost() host {
	h := systemHost()
	h.harden = func() error { return nil }
	h.probeKernel = func() error { return nil }
	h.probeAlgorithms = func() map[tcpao.Algorithm]error { return nil }
	return h
}

// systemctl reload aokeyd (SIGHUP) applies the policy and the log level of
// a changed aokeyd.yaml, and names each other changed setting, which keeps
// its running value until a restart: a log line and a status warning
// each, gone once the file has the running value again. A bad file is
// refused and changes nothing.
func TestReloadAppliesOrNamesEachSetting(t *testing.T) {
	h := acceptingHost()
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
	var restart []string
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
			restart = h.reload(context.Background(), cfgPath, running, core, log, restart)
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
				if !slices.ContainsFunc(core.warnings, func(w string) bool { return strings.Contains(w, "the last reload was refused") }) {
					t.Errorf("status does not say the reload was refused: %q", core.warnings)
				}
			}
			var named []string
			for _, w := range core.warnings {
				if strings.HasPrefix(w, cfgPath+": the last reload was refused") {
					if !tc.refused || !strings.Contains(w, "log.level") {
						t.Errorf("status warns %q", w)
					}
					continue
				}
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

// TestReloadKeepsWhatIsValid: systemctl reload aokeyd with a key file
// that validate now refuses (k2 given send_id 256, the secret pasted into
// k3's recv_id) is refused as the start would refuse it: the policy
// edited beside it is not applied, each problem is logged in validate's
// words, and status warns that the reload was refused, naming the first,
// never a secret. The daemon runs on with everything valid: the keys are
// read at once all the same, k1 stays, k2 keeps its last good version
// (held back, named by its field) and k4, added valid, comes in. Once
// the file is corrected, the next reload applies the policy and the
// warning goes. A Vault that gives no answer to a reload is no refusal:
// the policy is applied.
func TestReloadKeepsWhatIsValid(t *testing.T) {
	h := acceptingHost()
	dir := t.TempDir()
	cfgPath := initTestConfig(t, dir)
	keysPath, polPath := filepath.Join(dir, "keys.yaml"), filepath.Join(dir, "policy.yaml")
	good := startKeyFile(k2())
	k4 := "      - name: k4\n        send_id: 4\n        recv_id: 104\n        algorithm: hmac(sha256)\n        secret_b64: \"" + startThirdB64 + "\"\n"
	bad := startKeyFile(k2("send_id: 2", "send_id: 256") +
		strings.ReplaceAll(k2("recv_id: 102", "recv_id: "+startPastedSecret), "k2", "k3") + k4)
	pol, err := os.ReadFile(polPath)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(pol), "  - neighbor: 2001:db8::2\n    key_chain: demo\n", "", 1)
	if edited == string(pol) {
		t.Fatal("the demo policy has no binding of 2001:db8::2")
	}
	write := func(keys, pol string) {
		t.Helper()
		if err := os.WriteFile(keysPath, []byte(keys), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(polPath, []byte(pol), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write(good, string(pol))
	running, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.SyncBuffer{}
	log, err := newLogger(running.Log, logs)
	if err != nil {
		t.Fatal(err)
	}
	src, err := running.OpenKeySource(config.SourceOptions{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cache := keystore.NewCache(src, keystore.CacheOptions{Logger: log})
	defer cache.Close()
	core := &fakeCore{keys: cache}
	if err := core.RefreshKeys(context.Background()); err != nil {
		t.Fatal(err)
	}

	// The edit: validate refuses it, in these words.
	write(bad, edited)
	lines := validateLines(t, cfgPath, "send_id", h.checkOptions(nil))
	mark := len(logs.String())
	restart := h.reload(context.Background(), cfgPath, running, core, log, nil)
	out := logs.String()[mark:]
	if core.policies != 0 || restart != nil {
		t.Errorf("a refused reload applied the policy (%d) or named settings (%q)", core.policies, restart)
	}
	for _, l := range lines {
		if !strings.Contains(out, "reload refused") || !strings.Contains(out, strconv.Quote(l)) {
			t.Errorf("the reload's log lacks validate's line %q:\n%s", l, redactTestSecrets(out))
		}
	}
	if len(core.warnings) != 1 || !strings.Contains(core.warnings[0], "the last reload was refused ("+strconv.Itoa(len(lines))+" problems, the first: "+lines[0]+")") {
		t.Errorf("status warns %q, want the refused reload with validate's first line %q", core.warnings, lines[0])
	}
	noTestSecret(t, out+strings.Join(core.warnings, "\n"))
	snap := cache.Current()
	var keys []string
	for _, m := range snap.Chains["demo"].Keys {
		keys = append(keys, m.Name)
	}
	snap.Zero()
	if slices.Sort(keys); !slices.Equal(keys, []string{"k1", "k2", "k4"}) || core.refreshes != 2 {
		t.Errorf("keys in force after the refused reload %q (refreshes %d), want k1, k2 (last good) and k4 (new), read at once", keys, core.refreshes)
	}
	held := cache.Status().Held
	if !slices.ContainsFunc(held, func(h keystore.Hold) bool {
		return h.What() == "demo/k2" && h.LastGood && strings.HasSuffix(h.Field, "send_id")
	}) {
		t.Errorf("held back %+v, want demo/k2's last good version, named by send_id", held)
	}

	// Corrected: the next reload applies the policy; the warning goes.
	write(startKeyFile(k2()+k4), edited)
	h.reload(context.Background(), cfgPath, running, core, log, nil)
	if core.policies != 1 || len(core.warnings) != 0 {
		t.Errorf("after the correction: policy applied %d times, status warns %q; want once and nothing", core.policies, core.warnings)
	}

	// A Vault that gives no answer (nothing listens at its address).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	replaceInFile(t, cfgPath, "key_source:\n  type: file\n  file:\n    path: "+keysPath+"\n",
		"key_source:\n  type: vault\n  vault:\n    address: http://"+addr+"\n")
	t.Setenv("VAULT_TOKEN", "not-a-token")
	t.Setenv("VAULT_MAX_RETRIES", "0")
	mark = len(logs.String())
	h.reload(context.Background(), cfgPath, running, &fakeCore{}, log, nil)
	if out := logs.String()[mark:]; strings.Contains(out, "reload refused") || !strings.Contains(out, "the key source gave no answer") {
		t.Errorf("a reload with Vault down: want no refusal and the unanswered source named:\n%s", out)
	}
}

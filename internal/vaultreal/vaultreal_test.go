package vaultreal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What the dev server prints at start-up (shape of Vault 1.21's output):
// Log drops the lines with the token and the unseal key, and masks a
// known secret wherever else it shows.
func TestLogHidesSecrets(t *testing.T) {
	dir := t.TempDir()
	s := &Server{logPath: filepath.Join(dir, "vault.log"), RootToken: "hvs.root-secret", unseal: "unseal-secret"}
	out := `==> Vault server configuration:
             Api Address: http://127.0.0.1:8200
Unseal Key: unseal-secret
Root Token: hvs.root-secret
Unseal Key 1: unseal-secret
Error initializing: custom token ID cannot have the 'hvs.' prefix
[WARN]  core: request with hvs.root-secret in it
Development mode should NOT be used in production installations!
`
	if err := os.WriteFile(s.logPath, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	got := s.Log()
	for _, secret := range []string{"hvs.root-secret", "unseal-secret"} {
		if strings.Contains(got, secret) {
			t.Errorf("Log shows a secret:\n%s", got)
		}
	}
	for _, keep := range []string{"Api Address: http://127.0.0.1:8200", "[WARN]  core: request with [redacted] in it", "Development mode", "custom token ID cannot"} {
		if !strings.Contains(got, keep) {
			t.Errorf("Log lost %q:\n%s", keep, got)
		}
	}
}

func TestBinarySkipsOrFails(t *testing.T) {
	t.Setenv("AOKEYD_VAULT", "")
	t.Setenv("AOKEYD_REQUIRE_VAULT", "")
	t.Run("Skips", func(t *testing.T) {
		Binary(t)
		t.Error("Binary returned without AOKEYD_VAULT")
	})
	ft := &fakeT{T: t}
	t.Setenv("AOKEYD_REQUIRE_VAULT", "1")
	func() {
		defer func() { _ = recover() }()
		Binary(ft)
	}()
	if !ft.fatal || ft.skipped {
		t.Errorf("with AOKEYD_REQUIRE_VAULT=1: fatal %t, skipped %t; want a failure", ft.fatal, ft.skipped)
	}
}

// fakeT records Fatal and Skip instead of ending the test.
type fakeT struct {
	*testing.T
	fatal, skipped bool
}

func (f *fakeT) Fatal(...any)          { f.fatal = true; panic("fatal") }
func (f *fakeT) Fatalf(string, ...any) { f.fatal = true; panic("fatal") }
func (f *fakeT) Skip(...any)           { f.skipped = true; panic("skip") }
func (f *fakeT) Helper()               {}

// A bare name in AOKEYD_VAULT (the guest's AOKEYD_VAULT=vault) is looked
// up in PATH; one PATH lacks is a failure, not a skip.
func TestBinaryLooksUpAName(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "vault")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv("AOKEYD_VAULT_REPORT", "")
	t.Setenv("AOKEYD_VAULT", "vault")
	if got := Binary(t); got != bin {
		t.Errorf("Binary() = %q, want %q", got, bin)
	}
	t.Setenv("AOKEYD_VAULT", "no-such-vault")
	ft := &fakeT{T: t}
	func() {
		defer func() { _ = recover() }()
		Binary(ft)
	}()
	if !ft.fatal || ft.skipped {
		t.Errorf("a name not in PATH: fatal %t, skipped %t; want a failure", ft.fatal, ft.skipped)
	}
}

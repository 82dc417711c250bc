package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/aokeyd/aokeyd/internal/birdnative"
	"github.com/aokeyd/aokeyd/internal/config"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// TestEveryKindOpens: every entry of the speaker registry is opened as its
// entry says: a kind that keys its own sockets by an executor, any other
// as a Speaker, and by exactly one of them.
func TestEveryKindOpens(t *testing.T) {
	for _, k := range config.SpeakerKinds {
		_, speaker := speakerOpeners[k]
		_, exec := executors[k]
		if speaker == exec || speaker != (k.Opens() == config.OpensSpeaker) {
			t.Errorf("%s opens as %v: opener %t, executor %t", k.Name, k.Opens(), speaker, exec)
		}
	}
	if len(speakerOpeners)+len(executors) != len(config.SpeakerKinds) {
		t.Errorf("%d openers and %d executors for %d kinds", len(speakerOpeners), len(executors), len(config.SpeakerKinds))
	}
}

// TestExecutorRefusesWhatItsEntryLacks: aokeyd for BIRD (the daemon over
// BIRD's executor, with BIRD's registry entry) carries out aoctl replace,
// adopt and migrate exactly when the entry says BIRD supports them (it
// supports none: each is refused as invalid, and no far end's migration
// is followed).
func TestExecutorRefusesWhatItsEntryLacks(t *testing.T) {
	dir := t.TempDir()
	kf := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(kf, []byte("chains: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := keystore.NewFile(keystore.FileOptions{Path: kf})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse("policy.yaml", []byte("version: 1\nkey_chains:\n  - name: c\npeers:\n  - {neighbor: 192.0.2.2, key_chain: c}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := birdnative.Open(birdnative.ExecOptions{Dir: filepath.Join(dir, "keys"), Control: filepath.Join(dir, "bird.ctl"), Bird: "true"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{Keys: keystore.NewCache(src, keystore.CacheOptions{}), Source: src, Policy: pol, Executor: ex,
		Kind: config.BirdKind.Kind})
	if err != nil {
		t.Fatal(err)
	}
	if d.MigrationFollowWanted() != config.BirdKind.Caps.Migrate {
		t.Errorf("MigrationFollowWanted %t, the registry says migrate %t", d.MigrationFollowWanted(), config.BirdKind.Caps.Migrate)
	}
	ctx := context.Background()
	caps := config.BirdKind.Caps
	_, rerr := d.Replace(ctx, control.ReplaceRequest{})
	_, aerr := d.Adopt(ctx, control.AdoptRequest{})
	_, merr := d.Migrate(ctx, control.MigrateRequest{})
	for _, c := range []struct {
		op        string
		supported bool
		err       error
	}{{"replace", caps.Replace, rerr}, {"adopt", caps.Adopt, aerr}, {"migrate", caps.Migrate, merr}} {
		if refused := errors.Is(c.err, control.ErrInvalid); refused == c.supported {
			t.Errorf("aoctl %s: the registry says supported %t, the executor answers %v", c.op, c.supported, c.err)
		}
	}
}

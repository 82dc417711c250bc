package rcu

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// knob is a file standing for /sys/kernel/rcu_expedited.
func knob(t *testing.T, v string) (knob, record string) {
	t.Helper()
	dir := t.TempDir()
	knob, record = filepath.Join(dir, "rcu_expedited"), filepath.Join(dir, "state", RecordName)
	if err := os.WriteFile(knob, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Dir(record), 0o700); err != nil {
		t.Fatal(err)
	}
	return knob, record
}

func value(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// TestHoldSetsAndPutsBack: a hold sets the knob to 1 with the value found
// recorded; nested holds keep it; the last release puts the value back and
// removes the record.
func TestHoldSetsAndPutsBack(t *testing.T) {
	k, rec := knob(t, "0\n")
	e, err := Open(k, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	r1 := e.Hold()
	if value(t, k) != "1" || value(t, rec) != "0" {
		t.Fatalf("during a hold: knob %q record %q, want 1 and 0", value(t, k), value(t, rec))
	}
	r2 := e.Hold()
	r1()
	r1() // a release counts once
	if value(t, k) != "1" {
		t.Fatalf("one hold left: knob %q, want 1", value(t, k))
	}
	r2()
	if value(t, k) != "0" || exists(rec) {
		t.Fatalf("after the last release: knob %q, record there %v; want 0, none", value(t, k), exists(rec))
	}
}

// TestOperatorsValueUntouched: a knob found at 1 is the operator's: a hold
// records nothing and its release leaves it at 1.
func TestOperatorsValueUntouched(t *testing.T) {
	k, rec := knob(t, "1\n")
	e, _ := Open(k, rec, nil)
	release := e.Hold()
	if exists(rec) {
		t.Fatal("a record was written for a knob found at 1")
	}
	release()
	if value(t, k) != "1" {
		t.Fatalf("knob %q after the release, want the operator's 1", value(t, k))
	}
}

// TestOpenPutsBackAfterACrash: a record left by a stop that did not
// finish a batch (the knob still at 1) is put back at the next start.
func TestOpenPutsBackAfterACrash(t *testing.T) {
	k, rec := knob(t, "0\n")
	e, _ := Open(k, rec, nil)
	e.Hold() // never released: the process dies here
	if value(t, k) != "1" {
		t.Fatal("the hold did not set the knob")
	}
	var logs bytes.Buffer
	if _, err := Open(k, rec, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if value(t, k) != "0" || exists(rec) {
		t.Fatalf("after the start: knob %q, record there %v; want 0, none", value(t, k), exists(rec))
	}
	if !strings.Contains(logs.String(), "put back") {
		t.Errorf("the start did not say it put the value back: %s", logs.String())
	}
}

// TestOpenRefusesABadRecord: a record that is not a value (or a symlink)
// is refused with the fix, and the knob is left alone.
func TestOpenRefusesABadRecord(t *testing.T) {
	for name, plant := range map[string]func(rec string) error{
		"garbage": func(rec string) error { return os.WriteFile(rec, []byte("yes please\n"), 0o600) },
		"symlink": func(rec string) error { return os.Symlink("/etc/passwd", rec) },
	} {
		t.Run(name, func(t *testing.T) {
			k, rec := knob(t, "1\n")
			if err := plant(rec); err != nil {
				t.Fatal(err)
			}
			_, err := Open(k, rec, nil)
			if err == nil || !strings.Contains(err.Error(), "remove it") {
				t.Fatalf("Open: %v, want a refusal naming the fix", err)
			}
			if value(t, k) != "1" {
				t.Errorf("knob %q, want it untouched", value(t, k))
			}
		})
	}
}

// TestHoldWithoutTheKnob: a knob that cannot be read (a kernel without it,
// a container) makes holds do nothing, logged once.
func TestHoldWithoutTheKnob(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	e, err := Open(filepath.Join(dir, "missing"), filepath.Join(dir, RecordName), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e.Hold()()
	e.Hold()()
	if n := strings.Count(logs.String(), "cannot read"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, logs.String())
	}
	if exists(filepath.Join(dir, RecordName)) {
		t.Error("a record was left")
	}
	var nilE *Expediter
	nilE.Hold()() // the setting off
}

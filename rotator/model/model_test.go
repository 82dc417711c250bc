package model_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/rotator"
)

// modelNames reads the names of one mtype of rotator/model/roll.pml
// ("mtype:state = { steady, ... };").
func modelNames(t *testing.T, src, typ string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^mtype:` + typ + `\s*=\s*\{([^}]*)\}`).FindStringSubmatch(src)
	if m == nil {
		t.Fatalf("roll.pml declares no mtype:%s", typ)
	}
	var names []string
	for _, f := range strings.Split(m[1], ",") {
		names = append(names, strings.TrimSpace(f))
	}
	return names
}

// The model's states and steps are the machine's, by name and order.
func TestModelNames(t *testing.T) {
	b, err := os.ReadFile("roll.pml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	var states, steps []string
	for _, s := range rotator.States() {
		states = append(states, string(s))
	}
	for _, s := range rotator.Steps() {
		steps = append(steps, string(s))
	}
	for _, c := range []struct {
		typ  string
		want []string
	}{{"state", states}, {"step", steps}} {
		if got := modelNames(t, src, c.typ); !slices.Equal(got, c.want) {
			t.Errorf("roll.pml mtype:%s = %v; rotator exports %v", c.typ, got, c.want)
		}
	}
}

// Every mutant beside the model still violates a property: the model's
// properties cannot silently weaken. It needs spin and a C compiler; with
// AOKEYD_REQUIRE_SPIN=1 (make model) a missing spin fails the test.
func TestModelMutants(t *testing.T) {
	if _, err := exec.LookPath("spin"); err != nil {
		if os.Getenv("AOKEYD_REQUIRE_SPIN") != "" {
			t.Fatalf("spin is not installed: make deps installs Debian's spin package (%v)", err)
		}
		t.Skip("spin is not installed (make deps installs it; AOKEYD_REQUIRE_SPIN=1 makes this a failure)")
	}
	mutants, err := filepath.Glob("mutant_*.pml")
	if err != nil || len(mutants) < 2 {
		t.Fatalf("want at least two mutants beside the model, found %v (%v)", mutants, err)
	}
	// One mutant per property the model exists for: none may go missing.
	for _, name := range []string{"retire_early", "retire_in_use", "switch_unproven", "lifetime_drops_listener", "edit_applied", "edit_counters_only", "edit_unsettled", "md5_early", "restart_no_gate", "record_trusted"} {
		if !slices.Contains(mutants, "mutant_"+name+".pml") {
			t.Errorf("mutant_%s.pml is missing: it shows that the model's properties catch its fault", name)
		}
	}
	src, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m), "mutant_"), ".pml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pmls, _ := filepath.Glob(filepath.Join(src, "*.pml"))
			for _, p := range pmls {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			run := func(name string, args ...string) string {
				t.Helper()
				cmd := exec.Command(name, args...)
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				if err != nil && name != "./pan" {
					t.Fatalf("%s %v: %v\n%s", name, args, err, out)
				}
				return string(out)
			}
			run("spin", "-a", filepath.Base(m))
			run("cc", "-DMEMLIM=4096", "-DNOCLAIM", "-o", "pan", "pan.c")
			out := run("./pan", "-m200000")
			e := regexp.MustCompile(`errors: (\d+)`).FindStringSubmatch(out)
			if e == nil {
				t.Fatalf("pan printed no error count:\n%s", out)
			}
			if e[1] == "0" {
				t.Fatalf("mutant %s violates no safety property: the model's assertions are too weak\n%s", name, out)
			}
		})
	}
}

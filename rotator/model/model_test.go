package model_test

import (
	"os"
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

package field

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// TestGuideStepsRun: the steps of docs/operations.md (its
// "<!-- step: NAME -->" lines, each followed by a sh block) and the steps
// the field scenario runs (`guide NAME`) are the same set, so no part of
// the guide goes untested and the scenario runs no step the guide lost.
func TestGuideStepsRun(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := os.ReadFile("scenario.sh")
	if err != nil {
		t.Fatal(err)
	}
	steps := func(re string, b []byte) []string {
		var out []string
		for _, m := range regexp.MustCompile(re).FindAllSubmatch(b, -1) {
			out = append(out, string(m[1]))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	inDoc := steps(`(?m)^<!-- step: ([a-z0-9-]+) -->\n`+"```sh$", doc)
	run := steps(`(?m)^\s*(?:.*[;(&|]\s*)?guide ([a-z0-9-]+)\b`, sc)
	if len(inDoc) == 0 {
		t.Fatal("docs/operations.md marks no step followed by a sh block")
	}
	for _, s := range inDoc {
		if !slices.Contains(run, s) {
			t.Errorf("docs/operations.md step %q is not run by integration/field/scenario.sh", s)
		}
	}
	for _, s := range run {
		if !slices.Contains(inDoc, s) {
			t.Errorf("integration/field/scenario.sh runs step %q, which docs/operations.md does not mark", s)
		}
	}
	t.Logf("%d guide steps, all run: %v", len(inDoc), inDoc)
}

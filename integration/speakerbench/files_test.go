package speakerbench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/integration/lab"
)

// diagnoseAokeyd keeps dir's aokeyd.log in $AOKEYD_FLEET_OUT as keepAs, and
// when t failed logs aokeyd's warnings and errors (the first and last 20)
// and its log's tail. It reports whether t failed (the caller then prints
// its routers' side).
func diagnoseAokeyd(t *testing.T, dir, keepAs string) bool {
	if out := os.Getenv(envOut); out != "" {
		if b, err := os.ReadFile(filepath.Join(dir, "aokeyd.log")); err == nil {
			_ = os.WriteFile(filepath.Join(out, keepAs), b, 0o644)
		}
	}
	if !t.Failed() {
		return false
	}
	var warn []string
	for _, l := range strings.Split(lab.Tail(filepath.Join(dir, "aokeyd.log"), 4<<20), "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			warn = append(warn, l)
		}
	}
	if len(warn) > 40 {
		warn = append(warn[:20], append([]string{"..."}, warn[len(warn)-20:]...)...)
	}
	t.Logf("aokeyd's warnings and errors:\n%s", strings.Join(warn, "\n"))
	t.Logf("aokeyd.log (tail):\n%s", lab.Tail(filepath.Join(dir, "aokeyd.log"), 6000))
	return true
}

// parseSizes reads a bench item's fleet sizes from spec, the value of env:
// 1 to 4000, separated by commas, in the order given.
func parseSizes(t *testing.T, env, spec string) []int {
	var sizes []int
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 4000 {
			t.Fatalf("%s=%q: want fleet sizes 1..4000 separated by commas", env, spec)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// writeResults writes an item's lines to dir/name.txt and its results,
// indented, to dir/name.json.
func writeResults(t *testing.T, dir, name, lines string, results any) {
	js, _ := json.MarshalIndent(results, "", "  ")
	for file, data := range map[string][]byte{name + ".txt": []byte(lines), name + ".json": js} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			t.Error(err)
		}
	}
}

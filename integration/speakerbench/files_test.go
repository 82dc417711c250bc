package speakerbench

import (
	"os"
	"path/filepath"
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

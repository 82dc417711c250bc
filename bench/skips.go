package bench

import (
	"os"
	"path/filepath"
	"strings"
)

// DaemonSkips lists the benchmarks that need the aokeyd daemon, with
// why they are not measured. daemonDir is cmd/aokeyd of the checkout.
func DaemonSkips(daemonDir string) []Skip {
	why := "needs the aokeyd daemon, and cmd/aokeyd has no Go code yet"
	if hasGo(daemonDir) {
		why = "cmd/aokeyd exists, but this bench has no daemon harness yet (start it with 1,000 peers and a policy); not measured"
	}
	return []Skip{
		{Item: "3. Emergency revoke across 1,000 peers", Why: why},
		{Item: "5. Daemon RSS and idle reconcile pass", Why: why},
	}
}

func hasGo(dir string) bool {
	es, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range es {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
			if _, err := os.Stat(filepath.Join(dir, e.Name())); err == nil {
				return true
			}
		}
	}
	return false
}

package daemon_test

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/metrics"
)

// TestLossyHoldIsVisible: a held-back key is in status (JSON field and
// warning, naming chain, key and field but not the secret's length), in
// the aokeyd_keys_held_back metric and in the plan.
func TestLossyHoldIsVisible(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "held"
		if restart {
			name = "after a restart"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := lossyCases()[0] // the only key gets an 81-byte secret
				k1 := c.keys[0]
				src := newFileLossy(t, c)
				reg := prometheus.NewPedanticRegistry()
				m, err := metrics.New(reg, metrics.Options{})
				if err != nil {
					t.Fatal(err)
				}
				e := newEnv(t, envOptions{keys: c.keys, source: src.source, metrics: m})
				e.waitKeys("listener", e.lis, ids(k1))
				src.apply(t, c.fault)
				if err := e.d.RefreshKeys(context.Background()); err != nil {
					t.Fatal(err)
				}
				e.settle()
				if restart {
					e.stop()
					e.start("")
					e.waitFor("the restarted daemon's first pass", func() bool { _, f := e.d.Passes(); return f > 0 })
				}
				rep, err := e.d.Status(context.Background(), "")
				if err != nil {
					t.Fatal(err)
				}
				want := control.HeldKey{Chain: chainName, Key: k1.name, Reason: control.HeldKeyRejected, Field: "chains.core.keys[0].secret_b64", LastGood: !restart}
				if h := rep.KeySource.Held; len(h) != 1 || h[0].Chain != want.Chain || h[0].Key != want.Key || h[0].Reason != want.Reason ||
					h[0].Field != want.Field || h[0].LastGood != want.LastGood || !strings.Contains(h[0].Source, "keys.yaml") {
					t.Errorf("status key_source.held %+v, want %+v from keys.yaml", h, want)
				}
				js, err := json.Marshal(rep)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(js), `"held":[{"chain":"core","key":"k1","reason":"key-rejected","field":"chains.core.keys[0].secret_b64"`) {
					t.Errorf("status JSON lacks the held key: %s", js)
				}
				if !hasWarning(e.warningsOf(), []string{chainName + "/" + k1.name, "keys[0].secret_b64: ", "kept"}) {
					t.Errorf("status warnings %q name neither core/k1 nor the field secret_b64", e.warningsOf())
				}
				for _, w := range e.warningsOf() {
					if regexp.MustCompile(`(^|[^0-9])81([^0-9]|$)`).MatchString(w) {
						t.Errorf("a warning states the rejected secret's length: %q", w)
					}
				}
				lastGood := "true"
				if restart {
					lastGood = "false"
				}
				exp := `# HELP aokeyd_keys_held_back 1 for each chain or key of the key source held back: its last good version is kept (last_good=true), or nothing of it is deleted (last_good=false).
# TYPE aokeyd_keys_held_back gauge
aokeyd_keys_held_back{chain="core",key="k1",last_good="` + lastGood + `",reason="key-rejected"} 1
`
				if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(exp), metrics.NameKeysHeldBack); err != nil {
					t.Errorf("metric: %v", err)
				}
				plan, err := e.d.Plan(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if !slices.ContainsFunc(plan.Plan, func(l string) bool {
					return strings.Contains(l, "held back") && strings.Contains(l, chainName+"/"+k1.name) && strings.Contains(l, "key-rejected")
				}) {
					t.Errorf("plan %q does not say core/k1 is held back", plan.Plan)
				}
				if slices.ContainsFunc(plan.Plan, func(l string) bool { return strings.Contains(l, "del ") }) {
					t.Errorf("plan %q deletes a key", plan.Plan)
				}
			})
		})
	}
}

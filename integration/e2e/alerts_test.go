package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// scrapes are aokeyd's metrics pages read once a second: per aokeyd_
// series (as the exposition format names it), its value at each scrape
// ("_": absent).
type scrapes struct {
	n      int
	series map[string][]string
}

func (s *scrapes) add(page string) {
	if s.series == nil {
		s.series = map[string][]string{}
	}
	sc := bufio.NewScanner(strings.NewReader(page))
	for sc.Scan() {
		line := sc.Text()
		// aokeyd's own series (not the Go runtime's, whose quantiles may
		// be NaN).
		if !strings.HasPrefix(line, "aokeyd_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name, v := line[:i], line[i+1:]
		vals := s.series[name]
		for len(vals) < s.n {
			vals = append(vals, "_")
		}
		s.series[name] = append(vals, v)
	}
	s.n++
}

// value is the series' value at the last scrape ("" when absent).
func (s *scrapes) last(name string) string {
	v := s.series[name]
	if len(v) < s.n || v[s.n-1] == "_" {
		return ""
	}
	return v[s.n-1]
}

// promtoolTest is a promtool rule test over the scraped series (one
// sample a second) for the rules file.
func (s *scrapes) promtoolTest(rules string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files:\n  - %s\nevaluation_interval: 1s\ntests:\n  - interval: 1s\n    input_series:\n", strconv.Quote(rules))
	names := make([]string, 0, len(s.series))
	for n := range s.series {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		vals := s.series[n]
		for len(vals) < s.n {
			vals = append(vals, "_")
		}
		fmt.Fprintf(&b, "      - series: %s\n        values: %s\n", strconv.Quote(n), strconv.Quote(strings.Join(vals, " ")))
	}
	b.WriteString(body)
	return b.String()
}

// TestLaggingPeerAlert is the lagging-peer scenario (B never gets the new
// key) with aokeyd's metrics scraped every second; the shipped alerting
// rules (deploy/prometheus/aokeyd-rules.yml) are then evaluated with
// promtool against that run's samples: AokeydRollStalled is not firing
// before the roll and fires once the switch timeout has passed.
func TestLaggingPeerAlert(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	promtool := lab.MustBin(t, "promtool")
	rules, err := filepath.Abs("../../deploy/prometheus/aokeyd-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	k1 := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{k1}, nil)
	s := l.waitEstablished(60 * time.Second)
	var sc scrapes
	scrape := func() {
		page, err := l.lossyMetrics()
		if err != nil {
			t.Fatalf("scraping %s: %v", l.metricsURL, err)
		}
		sc.add(page)
	}
	for range 3 {
		scrape()
		time.Sleep(time.Second)
	}
	before := sc.n - 1
	now := time.Now()
	old := k1
	old.sendEnd, old.acceptEnd = now.Add(2*time.Second), now.Add(time.Hour)
	k2 := key{i: 2, sendStart: now.Add(-time.Second), acceptStart: now.Add(-time.Second)}
	l.writeKeys([]key{old, k2})
	stalled := fmt.Sprintf(`aokeyd_rotation_failed_attempts{peer=%q,reason="switch-timeout",vrf=""}`, l.ipB().String())
	deadline := time.Now().Add(60 * time.Second)
	for sc.last(stalled) == "" || sc.last(stalled) == "0" {
		if time.Now().After(deadline) {
			t.Fatalf("no switch-timeout abort in the metrics within 60s; rotation %+v", l.status().Rotation)
		}
		time.Sleep(time.Second)
		scrape()
	}
	l.checkNoFlap(s, "while B lags")
	attempts := sc.last(stalled)
	at := sc.n - 1
	body := fmt.Sprintf(`    alert_rule_test:
      - eval_time: %ds
        alertname: AokeydRollStalled
        exp_alerts: []
      - eval_time: %ds
        alertname: AokeydRollStalled
        exp_alerts:
          - exp_labels: {severity: warning, peer: %q, reason: switch-timeout}
            exp_annotations:
              summary: "TCP-AO key roll to %[3]s stalled past the switch timeout"
              description: "Peer %[3]s (vrf ) has not sent with the announced key within switch_timeout (%[4]s aborted attempts); aokeyd keeps the old key. Check that the far end has the new key: aoctl status %[3]s; aoctl peer-config %[3]s --for ..."
`, before, at, l.ipB().String(), attempts)
	test := filepath.Join(t.TempDir(), "lagging-peer.test.yml")
	if err := os.WriteFile(test, []byte(sc.promtoolTest(rules, body)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", test).CombinedOutput()
	// Keep the samples and the test for a look from the host.
	if fi, serr := os.Stat("/aokeyd/share/out"); serr == nil && fi.IsDir() {
		data, _ := os.ReadFile(test)
		_ = os.WriteFile("/aokeyd/share/out/lagging-peer.test.yml", data, 0o644)
	}
	if err != nil {
		t.Fatalf("promtool test rules on the lagging-peer run's metrics (%d scrapes, %d series): %v\n%s", sc.n, len(sc.series), err, out)
	}
	fmt.Printf("lagging-peer alert: AokeydRollStalled fired at scrape %d (not at %d); promtool test rules over %d scrapes of %d series: %s\n",
		at, before, sc.n, len(sc.series), strings.TrimSpace(strings.ReplaceAll(string(out), "\n", " ")))
}

package metrics

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestPromtoolCheckMetrics serves a metric set with every series aokeyd
// exports over HTTP with aokeyd's metrics handler, and pipes the page
// to `promtool check metrics` (Prometheus's linter: names, units, types,
// help), with metrics.per_key (every series) and without (the default
// set). AOKEYD_PROMTOOL names the promtool (`make rules` sets it from
// integration/tools/promtool.sh); without it the test is skipped.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := os.Getenv("AOKEYD_PROMTOOL")
	if promtool == "" {
		t.Skip("AOKEYD_PROMTOOL not set (make rules sets it)")
	}
	for _, perKey := range []bool{true, false} {
		t.Run(fmt.Sprintf("per_key=%v", perKey), func(t *testing.T) { promtoolCheck(t, promtool, perKey) })
	}
}

func promtoolCheck(t *testing.T, promtool string, perKey bool) {
	m, err := New(prometheus.NewPedanticRegistry(), Options{PerKey: perKey})
	if err != nil {
		t.Fatal(err)
	}
	p := Peer{Addr: "192.0.2.2"}
	m.SetPeerKeys(p, u8(1), u8(101), 2)
	m.SetRotationState(p, "announced")
	m.SetVerifyFailing(p, false)
	m.SetKeyNotFound(p, false)
	m.SetCountersReadAt(p, time.Now().Add(-3*time.Second))
	m.SetRollAttempts(p, 1, "switch-timeout")
	m.SetSendCoverageEnd(p, time.Unix(1800000000, 0))
	m.RotationStarted(p)
	m.RotationCompleted(p)
	m.RotationAborted(p, "switch-timeout")
	m.ObserveKeys(p, []KeyCounters{{Key: "1/101", SendID: 1, RecvID: 101, PktGood: 5, PktBad: 1}})
	m.ObserveSocket(p, "established", SocketCounters{PktGood: 5, PktBad: 1, PktKeyNotFound: 2, PktAORequired: 3})
	m.KeySourceSynced(time.Unix(1790000000, 0))
	m.KeySourceFailed()
	m.Revoked("deleted")
	m.RevokeDone(20 * time.Millisecond)
	m.SetOptmem(131072, 4096)
	m.SetHeldBack([]HeldBack{{Chain: "core", Key: "2026-11", Reason: "key-rejected", LastGood: true}})
	m.SetKept([]Kept{{Peer: "192.0.2.2", Socket: "established", SendID: 1, RecvID: 1, Reason: "carried"}})
	m.ControlRefused()
	m.SpeakerRPC("ListPeer")

	// aokeyd's own handler: the text format Prometheus scrapes is written
	// by the per-peer store, not by client_golang.
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The families the shipped alerts read are on the page either way;
	// the per-key ones only with per_key.
	for _, name := range []string{NameRotationFailedAttempts, NameSendCoverageEnd, NameKeysHeldBack, NameSocketPktKeyNotFound, NameRotationState} {
		if !bytes.Contains(page, []byte("\n"+name)) {
			t.Errorf("page lacks %s", name)
		}
	}
	for _, name := range PerKeyFamilies() {
		if bytes.Contains(page, []byte("\n"+name+"{")) != perKey {
			t.Errorf("per_key %v: %s on the page: %v", perKey, name, !perKey)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(page)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	t.Logf("promtool check metrics: %d bytes, %d lines, no problems", len(page), bytes.Count(page, []byte("\n")))
}

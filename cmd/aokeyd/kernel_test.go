package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestStartupKernelDefects: the start-up log names the running kernel,
// and on a release with a known TCP-AO defect (or one aokeyd cannot place)
// the defect, its fixed releases and the mitigation; the daemon's Kernel
// then asks for synchronous listener deletes.
func TestStartupKernelDefects(t *testing.T) {
	cases := []struct {
		release string
		want    []string // in the defect line; none: no such line
		sync    bool
	}{
		{release: "6.12.94+deb13-amd64", sync: true,
			want: []string{"Linux 6.12.94+deb13-amd64", "CVE-2026-53389", "6.12.95, 6.18.38, 7.1.3, 7.2 and later", "synchronous listener key deletes"}},
		{release: "7.3.4+bpo-amd64"},
		{release: "not-linux-at-all", sync: true,
			want: []string{"Linux not-linux-at-all", "cannot be checked", "synchronous listener key deletes"}},
	}
	for _, c := range cases {
		t.Run(c.release, func(t *testing.T) {
			h := host{uname: func() string { return c.release }, probeAlgorithms: func() map[tcpao.Algorithm]error { return map[tcpao.Algorithm]error{} }}
			var buf bytes.Buffer
			k := h.kernel(slog.New(slog.NewTextHandler(&buf, nil)))
			if k.SyncListenerDeletes() != c.sync {
				t.Errorf("SyncListenerDeletes = %v, want %v", k.SyncListenerDeletes(), c.sync)
			}
			var defect []string
			for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if !strings.Contains(l, "kernel TCP-AO algorithms") {
					defect = append(defect, l)
				} else if !strings.Contains(l, "Linux "+c.release) {
					t.Errorf("algorithms line %q does not name the kernel", l)
				}
			}
			if len(c.want) == 0 {
				if len(defect) != 0 {
					t.Fatalf("a fixed kernel logs %q", defect)
				}
				return
			}
			if len(defect) != 1 {
				t.Fatalf("defect lines %q, want one", defect)
			}
			for _, w := range c.want {
				if !strings.Contains(defect[0], w) {
					t.Errorf("defect line %q does not name %q", defect[0], w)
				}
			}
		})
	}
}

package daemon_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/tcpao/tcpaotest"
)

// TestKernelDefectsPolicy: what aokeyd makes of a kernel release. An
// affected release gets synchronous listener deletes, a status naming the
// defect, its fixed releases and the mitigation, and a start-up log line
// saying the same; a fixed one none of it; a release that cannot be placed
// (not understood, or a version older than TCP-AO: a backport) the safe
// mode, with a warning and a log line that say why.
func TestKernelDefectsPolicy(t *testing.T) {
	const cve = "CVE-2026-53389"
	cases := []struct {
		release  string
		sync     bool
		defects  int
		unplaced bool
	}{
		{release: "6.12.94+deb13-amd64", sync: true, defects: 1},
		{release: "6.12.95", sync: false},
		{release: "6.12.117-cloud-amd64", sync: false},
		{release: "6.18.0-rc5", sync: true, defects: 1},
		{release: "6.18.38", sync: false},
		{release: "7.1.2", sync: true, defects: 1},
		{release: "7.2.13-1", sync: false},
		{release: "7.3.4+bpo-amd64", sync: false},
		{release: "5.14.0-427.el9.x86_64", sync: true, unplaced: true},
		{release: "weird", sync: true, unplaced: true},
		{release: "", sync: true, unplaced: true},
	}
	for _, c := range cases {
		t.Run(c.release, func(t *testing.T) {
			k := daemon.NewKernel(c.release, nil)
			if got := k.SyncListenerDeletes(); got != c.sync {
				t.Fatalf("SyncListenerDeletes = %v, want %v", got, c.sync)
			}
			rep := control.StatusReport{Kernel: k.Status()}
			rep.Complete()
			var log bytes.Buffer
			k.LogDefects(slog.New(slog.NewTextHandler(&log, nil)))
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			if log.Len() == 0 {
				lines = nil
			}
			st := rep.Kernel
			if len(st.Defects) != c.defects || (st.Unplaced != "") != c.unplaced {
				t.Fatalf("status kernel %+v, want %d defects, unplaced %v", st, c.defects, c.unplaced)
			}
			if !c.sync {
				if len(rep.Warnings) != 0 || len(lines) != 0 || st.Mitigation != "" {
					t.Fatalf("a fixed kernel warns %q, logs %q, mitigation %q", rep.Warnings, lines, st.Mitigation)
				}
				return
			}
			if len(rep.Warnings) != 1 || len(lines) != 1 {
				t.Fatalf("warnings %q, log %q: want one of each", rep.Warnings, lines)
			}
			want := []string{k.Release, "synchronous listener key deletes"}
			if c.unplaced {
				want = append(want, st.Unplaced)
			} else {
				want = append(want, cve, "del_async path on a listener", "6.12.95, 6.18.38, 7.1.3, 7.2 and later")
			}
			for _, w := range want {
				if !strings.Contains(rep.Warnings[0], w) {
					t.Errorf("status warning %q does not name %q", rep.Warnings[0], w)
				}
				if w != st.Unplaced && !strings.Contains(lines[0], w) {
					t.Errorf("start-up log %q does not name %q", lines[0], w)
				}
			}
		})
	}
}

// TestListenerDeletesFollowKernel: on a kernel with the del_async defect
// (or one aokeyd cannot place) every key the daemon takes off the listener,
// by the listener sync or by a revoke, reaches the kernel as a synchronous
// delete; on a fixed kernel, or one not probed, as del_async.
func TestListenerDeletesFollowKernel(t *testing.T) {
	cases := []struct {
		release string // "": Options.Kernel not probed
		sync    bool
	}{
		{release: "", sync: false},
		{release: "7.3.4+bpo-amd64", sync: false},
		{release: "6.12.94+deb13-amd64", sync: true},
		{release: "not-a-release", sync: true},
	}
	for _, c := range cases {
		t.Run(c.release, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				k0, k1, k2, _ := testKeys()
				e := newEnv(t, envOptions{keys: []testKey{k0, k1, k2}, release: c.release})
				e.waitKeys("listener", e.lis, ids(k0, k1, k2))
				// aoctl plan shows the delete as it will run. The listener's
				// writes fail until the plan is read, so that k0's delete
				// stays pending whatever the reconcile goroutine does.
				e.lisC.failWrites(syscall.EIO)
				e.refreshWith(k1, k2)
				e.settle()
				rep, err := e.d.Plan(context.Background())
				if err != nil {
					t.Fatalf("Plan: %v", err)
				}
				del := slices.IndexFunc(rep.Plan, func(l string) bool { return strings.Contains(l, " del send=10 recv=11") })
				if del < 0 {
					t.Fatalf("plan lacks k0's delete: %q", rep.Plan)
				}
				if async := strings.Contains(rep.Plan[del], " async"); async == c.sync {
					t.Errorf("plan line %q: async %t on a kernel whose listener deletes run sync=%t", rep.Plan[del], async, c.sync)
				}
				e.lisC.failWrites(nil)
				e.settle()
				e.waitKeys("listener", e.lis, ids(k1, k2)) // the listener sync deletes k0
				res, err := e.d.Revoke(context.Background(), control.RevokeRequest{Chain: chainName, Key: k1.name, Peer: peerAddr.String()})
				if err != nil {
					t.Fatalf("Revoke: %v", err)
				}
				if res.Failed() {
					t.Fatalf("revoke %+v failed", res)
				}
				e.waitKeys("listener", e.lis, ids(k2))
				want := tcpaotest.ListenerDeletes{Async: 2}
				if c.sync {
					want = tcpaotest.ListenerDeletes{Sync: 2}
				}
				if got := e.net.ListenerDeletes(); got != want {
					t.Fatalf("listener deletes %+v, want %+v", got, want)
				}
			})
		})
	}
}

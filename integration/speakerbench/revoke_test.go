package speakerbench

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
)

// revoke runs `aoctl revoke fleet/k2` (the fleet's current key, k3 the
// backup on both sides) while reading the kernel, from the command's start
// until no fleet socket nor the listener carries k2.
func revoke(t *testing.T, f *bench, r *result, scale time.Duration) {
	aoctl := lab.MustBin(t, "aoctl")
	// aoctl's own cost, for comparison: its help (no daemon), a status of
	// one peer.
	st := time.Now()
	_ = exec.Command(aoctl, "help").Run()
	helpMs := ms(time.Since(st))
	st = time.Now()
	if out, err := exec.Command(aoctl, "--socket", f.ctl.Socket(), "--json", "status", addrSolo.String()).Output(); err != nil {
		t.Fatalf("aoctl status: %v: %s", err, out)
	}
	statusMs := ms(time.Since(st))
	pid := f.aokeyd.Process.Pid
	c0 := mustCPU(t, pid)
	type exit struct {
		out []byte
		err error
		at  time.Duration
	}
	exited := make(chan exit, 1)
	f.toggleProfile() // aokeyd's second profile window: the revoke
	rv := time.Now()
	go func() {
		out, err := exec.Command(aoctl, "--socket", f.ctl.Socket(), "--json", "revoke", chainFleet+"/k2").Output()
		exited <- exit{out, err, time.Since(rv)}
	}()
	done, _, perr := f.pollUntil(f.peers, rv, time.Minute+scale, "k2 revoked everywhere", clean(2), nil)
	e := <-exited
	cpuS := (mustCPU(t, pid) - c0).Seconds()
	f.toggleProfile()
	if e.err != nil {
		t.Fatalf("aoctl revoke %s/k2: %v: %s", chainFleet, e.err, e.out)
	}
	if perr != nil {
		t.Fatal(perr)
	}
	r.RevokeMs, r.RevokeAoctlMs = ms(last(done)), ms(e.at)
	var res control.RevokeResult
	if err := json.Unmarshal(e.out, &res); err != nil {
		t.Fatalf("aoctl revoke --json: %v: %s", err, e.out)
	}
	actions := map[string]int{}
	for _, s := range res.Sockets {
		actions[fmt.Sprint(s.Action)]++
		if s.Error != "" {
			t.Errorf("revoke: socket %+v", s)
		}
	}
	t.Logf("n=%d: aoctl revoke: last socket seen clean at %.0f ms, aoctl exit at %.0f ms (daemon's elapsed %v; aoctl help takes %.0f ms, an aoctl status of one peer %.0f ms), aokeyd CPU %.2fs; actions %v",
		r.N, r.RevokeMs, r.RevokeAoctlMs, time.Duration(res.Elapsed), helpMs, statusMs, cpuS, actions)
}

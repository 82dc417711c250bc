package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/internal/testkit"
	"github.com/aokeyd/aokeyd/internal/testkit/kerneltest"
)

// TestOperatorCommands runs the commands issue 49 items 10 to 12 gave the
// operator, with the aoctl binary against the lab's aokeyd, as an operator
// types them, and checks what they print against what the lab holds:
//
//   - aoctl version (text and --json): the daemon's version is the aokeyd
//     binary's own (`aokeyd version`), with the time it started;
//   - aoctl status --keys (text and --json), with k2 added ahead of its send
//     time: chain core sends with k1, and k2 is next from the send start
//     the test gave it;
//   - aoctl --json plan: one step object per plan line, about the test's
//     keys, and B's next scheduled change at k2's send start;
//   - aoctl rotate --wait, rolling to k2 ahead of its send time while BIRD
//     takes it as an operator does (it holds k2, then prefers it): prints
//     started, announced, switched and completed for B naming core/k2, the
//     result line, and exits 0; aoctl --json status --watch, running the
//     while, prints a report with k1 current before the roll and one with
//     k2 current after it;
//   - aoctl --json rotate --wait, rolling to k3, which BIRD never gets: the
//     roll aborts at the policy's switch timeout, the report says so, and
//     aoctl exits 1, the session still on k2.
//
// The session never flaps.
func TestOperatorCommands(t *testing.T) {
	kerneltest.Require(t)
	t.Parallel()
	started := time.Now()
	k1 := key{i: 1, birdPreferred: true}
	l := newLab(t, []key{k1}, nil)
	s := l.waitEstablished(120 * time.Second)
	peerB := l.ipB().String()

	// aoctl version: the daemon's version as the aokeyd binary gives it.
	vb, err := exec.Command(lab.MustBin(t, "aokeyd"), "version").Output()
	if err != nil {
		t.Fatalf("aokeyd version: %v: %s", err, vb)
	}
	daemonVersion, ok := strings.CutPrefix(strings.TrimSpace(string(vb)), "aokeyd ")
	if !ok || daemonVersion == "" {
		t.Fatalf("aokeyd version printed %q, want \"aokeyd VERSION\"", vb)
	}
	out := l.aoctlOK("version")
	var ver struct {
		Aoctl, Aokeyd, Socket string
		Started               time.Time
		DaemonError           string `json:"daemon_error"`
	}
	l.aoctlJSON(&ver, "--json", "version")
	switch {
	case ver.Aokeyd != daemonVersion || ver.DaemonError != "":
		t.Errorf("aoctl --json version: aokeyd %q (error %q), want the binary's %q", ver.Aokeyd, ver.DaemonError, daemonVersion)
	case ver.Started.Before(started.Add(-time.Second)) || ver.Started.After(time.Now()):
		t.Errorf("aoctl --json version: aokeyd started %s, want between the lab's start %s and now", ver.Started, started)
	case ver.Socket != l.ctl.Socket() || ver.Aoctl == "":
		t.Errorf("aoctl --json version: aoctl %q socket %q, want a version and %q", ver.Aoctl, ver.Socket, l.ctl.Socket())
	}
	if !hasLinePrefix(out, "aoctl "+ver.Aoctl) || !hasLinePrefix(out, "aokeyd "+daemonVersion+", started "+ver.Started.UTC().Format(time.RFC3339)) {
		t.Errorf("aoctl version does not show aoctl %s and aokeyd %s started %s:\n%s", ver.Aoctl, daemonVersion, ver.Started.UTC().Format(time.RFC3339), out)
	}

	// k2 arrives ahead of its send time: BIRD holds it (k1 still
	// preferred), and A's key source accepts it from now and sends with it
	// in an hour. aokeyd installs it on A's session, accept-only.
	now := time.Now()
	k2 := key{i: 2, sendStart: now.Add(time.Hour).Truncate(time.Second), acceptStart: now.Add(-time.Second)}
	if err := l.bird.Configure(l.birdConfig([]key{k1, k2})); err != nil {
		t.Fatal(err)
	}
	l.writeKeys([]key{k1, k2})
	l.waitKeys("A's session holds k2, k1 current", k2, k1)

	// aoctl status --keys: k1 sent with, k2 next from its send start.
	var chains struct {
		Chains []control.ChainStatus `json:"chains"`
	}
	l.aoctlJSON(&chains, "--json", "status", "--keys")
	i := slices.IndexFunc(chains.Chains, func(c control.ChainStatus) bool { return c.Chain == "core" })
	switch {
	case i < 0:
		t.Errorf("aoctl --json status --keys: no chain core in %+v", chains.Chains)
	case !chainKeyIs(chains.Chains[i].Sending, k1) || !chainKeyIs(chains.Chains[i].Next, k2) || !chains.Chains[i].NextAt.Equal(k2.sendStart):
		t.Errorf("aoctl --json status --keys: chain core sending %+v, next %+v from %s; want k1, then k2 from %s",
			chains.Chains[i].Sending, chains.Chains[i].Next, chains.Chains[i].NextAt, k2.sendStart)
	case len(chains.Chains[i].Keys) != 2 || !hasChainKey(chains.Chains[i].Keys, k1) || !hasChainKey(chains.Chains[i].Keys, k2):
		t.Errorf("aoctl --json status --keys: chain core keys %+v, want k1 and k2", chains.Chains[i].Keys)
	}
	out = l.aoctlOK("status", "--keys")
	if row := rowOf(out, "core"); len(row) < 7 || row[2] != k1.name() || row[3] != ids(k1) || row[4] != k2.name() || row[5] != ids(k2) ||
		row[6] != k2.sendStart.UTC().Format(time.RFC3339) {
		t.Errorf("aoctl status --keys: chain core's row %q, want SENDING %s %s, NEXT %s %s FROM %s:\n%s",
			row, k1.name(), ids(k1), k2.name(), ids(k2), k2.sendStart.UTC().Format(time.RFC3339), out)
	}

	// aoctl --json plan: a step object per line, about the test's keys;
	// B's next change is k2's send start.
	var plan control.PlanReport
	l.aoctlJSON(&plan, "--json", "plan")
	if !plan.Observed || len(plan.Steps) == 0 || len(plan.Steps) != len(plan.Plan) {
		t.Errorf("aoctl --json plan: observed %t, %d steps for %d lines: want the daemon's plan, a step per line", plan.Observed, len(plan.Steps), len(plan.Plan))
	}
	aboutB := false
	for _, st := range plan.Steps {
		aboutB = aboutB || strings.Contains(st.Socket, peerB)
		ok := st.Socket != "" && (st.Kind == "listening" || st.Kind == "established") && st.Op != "" && st.Text != "" &&
			(st.KeyRef == nil || slices.ContainsFunc([]key{k1, k2}, func(k key) bool { return st.KeyRef.SendID == k.sendID() && st.KeyRef.RecvID == k.recvID() })) &&
			(st.Chain == "" || st.Chain == "core" && (st.Key == k1.name() || st.Key == k2.name()))
		if !ok {
			t.Errorf("aoctl --json plan: step %+v: want socket, kind, op and text, about k1 or k2 of core", st)
		}
	}
	if !aboutB {
		t.Errorf("aoctl --json plan: no step about %s's sockets: %+v", peerB, plan.Steps)
	}
	if !slices.ContainsFunc(plan.Upcoming, func(e control.Event) bool {
		// Upcoming changes are per policy binding: B's host binding
		// reads as its address or its /32.
		return (e.Peer == peerB || e.Peer == peerB+"/32") && e.Chain == "core" && e.At.Equal(k2.sendStart) && e.Action != ""
	}) {
		t.Errorf("aoctl --json plan: upcoming %+v, want %s's change at k2's send start %s", plan.Upcoming, peerB, k2.sendStart)
	}

	// aoctl status --watch, from before the roll until after it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch := l.startAoctl(watchCtx, "--json", "status", "--watch", "--interval", "1s", peerB)
	lab.Eventually(t, 60*time.Second, "aoctl status --watch prints the status, k1 current", func() (bool, string) {
		watch.running(t)
		reps := watchReports(t, watch.stdout())
		return len(reps) > 0 && currentOf(reps[0], peerB) == k1.sendID(), watch.String()
	})

	// aoctl rotate --wait: the roll to k2, BIRD following as an operator
	// does once A announced it (as roll does): k2 preferred, k1
	// deprecated.
	rot := l.startAoctl(ctx, "rotate", "--wait", peerB)
	lab.Eventually(t, 120*time.Second, "aoctl rotate --wait prints k2 announced, and B sends with k2", func() (bool, string) {
		rot.running(t)
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		sends := slices.ContainsFunc(st.Keys, func(k control.Key) bool { return k.SendID == k2.sendID() && k.PktGood > 0 })
		return slices.Contains(stepsOf(rot.stdout(), peerB), control.RollAnnounced) && sends,
			fmt.Sprintf("A keys %v; aoctl rotate: %s", lab.KeyList(st.Keys), rot)
	})
	prefK2, depK1 := k2, k1
	prefK2.birdPreferred = true
	depK1.birdPreferred, depK1.birdDeprecated = false, true
	if err := l.bird.Configure(l.birdConfig([]key{depK1, prefK2})); err != nil {
		t.Fatal(err)
	}
	code := rot.wait(t, 5*time.Minute)
	out = rot.stdout()
	t.Logf("aoctl rotate --wait (exit %d):\n%s", code, out)
	if code != 0 {
		t.Fatalf("aoctl rotate --wait exited %d on a roll that completed, want 0:\n%s%s", code, out, rot.stderr())
	}
	if row := rowOf(out, peerB); !slices.Contains(row, "yes") || !strings.Contains(strings.Join(row, " "), "core/"+k2.name()) {
		t.Errorf("aoctl rotate: %s's row %q, want started, rolling to core/%s", peerB, row, k2.name())
	}
	want := []control.RollStepKind{control.RollStarted, control.RollAnnounced, control.RollSwitched, control.RollCompleted}
	if got := stepsOf(out, peerB); !isSubsequence(want, got) || slices.Contains(got, control.RollAborted) {
		t.Errorf("aoctl rotate --wait printed the steps %q, want %q in that order and no abort", got, want)
	}
	for _, line := range stepLines(out, peerB) {
		if f := strings.Fields(line); (f[2] == string(control.RollAnnounced) || f[2] == string(control.RollSwitched)) && !strings.Contains(line, "core/"+k2.name()) {
			t.Errorf("aoctl rotate --wait: %q does not name core/%s", line, k2.name())
		}
	}
	if !hasLinePrefix(out, peerB+": roll completed in ") {
		t.Errorf("aoctl rotate --wait: no line %q", peerB+": roll completed in ...")
	}
	l.waitKeys("A sends with k2", k2, k2)
	lab.Eventually(t, 60*time.Second, "aoctl status --watch prints k2 current", func() (bool, string) {
		watch.running(t)
		reps := watchReports(t, watch.stdout())
		return len(reps) > 1 && slices.ContainsFunc(reps[1:], func(r control.StatusReport) bool { return currentOf(r, peerB) == k2.sendID() }),
			watch.String()
	})
	stopWatch()
	watch.wait(t, time.Minute) // killed: its exit status says nothing
	reps := watchReports(t, watch.stdout())
	t.Logf("aoctl status --watch printed %d reports; B's current key in each: %v", len(reps), currents(reps, peerB))
	l.checkNoFlap(s, "after the roll to k2")

	// The roll done, the operator retires k1: k2 sends from now on in the
	// key source (aoctl rotate's roll ahead of time is over), and BIRD
	// drops k1. aokeyd removes k1 from A's session.
	k2.sendStart = time.Now().Add(-time.Second)
	l.writeKeys([]key{k2})
	lab.Eventually(t, 90*time.Second, "A's session holds k2 alone", func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		return len(st.Keys) == 1 && st.Keys[0].SendID == k2.sendID() && st.Keys[0].Current, fmt.Sprint(lab.KeyList(st.Keys))
	})
	if err := l.bird.Configure(l.birdConfig([]key{prefK2})); err != nil {
		t.Fatal(err)
	}

	// A roll the far end never follows: k3, which BIRD never gets. The
	// roll aborts at the switch timeout and aoctl exits 1.
	now = time.Now()
	k3 := key{i: 3, sendStart: now.Add(time.Hour).Truncate(time.Second), acceptStart: now.Add(-time.Second)}
	l.writeKeys([]key{k2, k3})
	l.waitKeys("A's session holds k3, k2 current", k3, k2)
	fail := l.startAoctl(ctx, "--json", "rotate", "--wait", peerB)
	code = fail.wait(t, 5*time.Minute)
	t.Logf("aoctl --json rotate --wait, B without k3 (exit %d):\n%s%s", code, fail.stdout(), fail.stderr())
	var rep struct {
		Rotate control.RotateResult `json:"rotate"`
		Rolls  []struct {
			Peer   string             `json:"peer"`
			Steps  []control.RollStep `json:"steps"`
			Result string             `json:"result"`
		} `json:"rolls"`
	}
	if err := json.Unmarshal([]byte(fail.stdout()), &rep); err != nil {
		t.Fatalf("aoctl --json rotate --wait: %v:\n%s", err, fail.stdout())
	}
	if code != 1 {
		t.Errorf("aoctl rotate --wait exited %d on a roll that aborted, want 1", code)
	}
	if len(rep.Rotate.Peers) != 1 || !rep.Rotate.Peers[0].Started || !strings.Contains(rep.Rotate.Peers[0].Detail, "core/"+k3.name()) {
		t.Errorf("aoctl --json rotate --wait: rotate %+v, want %s started rolling to core/%s", rep.Rotate.Peers, peerB, k3.name())
	}
	if len(rep.Rolls) != 1 || rep.Rolls[0].Peer != peerB || rep.Rolls[0].Result != "aborted" {
		t.Fatalf("aoctl --json rotate --wait: rolls %+v, want %s's, aborted", rep.Rolls, peerB)
	}
	var kinds []control.RollStepKind
	for _, st := range rep.Rolls[0].Steps {
		kinds = append(kinds, st.Step)
		if st.Step == control.RollAborted && st.Reason == "" {
			t.Errorf("aoctl --json rotate --wait: the abort %+v has no reason", st)
		}
	}
	if !isSubsequence([]control.RollStepKind{control.RollStarted, control.RollAborted}, kinds) ||
		slices.Contains(kinds, control.RollSwitched) || slices.Contains(kinds, control.RollCompleted) {
		t.Errorf("aoctl --json rotate --wait: steps %q, want started then aborted, never switched or completed", kinds)
	}
	if c := currentOf(control.StatusReport{Peers: []control.PeerStatus{l.status()}}, peerB); c != k2.sendID() {
		t.Errorf("after the aborted roll A sends with send id %d, want k2's %d", c, k2.sendID())
	}
	l.checkNoFlap(s, "after the aborted roll to k3")
}

// waitKeys waits until A's session holds k and sends with cur.
func (l *testbed) waitKeys(what string, k, cur key) {
	l.t.Helper()
	lab.Eventually(l.t, 90*time.Second, what, func() (bool, string) {
		st, err := l.tryStatus()
		if err != nil {
			return false, err.Error()
		}
		has := slices.ContainsFunc(st.Keys, func(x control.Key) bool { return x.SendID == k.sendID() && x.RecvID == k.recvID() })
		return has && currentOf(control.StatusReport{Peers: []control.PeerStatus{st}}, st.Peer) == cur.sendID(), fmt.Sprint(lab.KeyList(st.Keys))
	})
}

// aoctlArgs are args after the lab's control socket.
func (l *testbed) aoctlArgs(args []string) []string {
	return append([]string{"--socket", l.ctl.Socket()}, args...)
}

// aoctlOK runs aoctl and returns what it printed; anything but exit
// status 0 fails the test.
func (l *testbed) aoctlOK(args ...string) string {
	l.t.Helper()
	cmd := exec.Command(lab.MustBin(l.t, "aoctl"), l.aoctlArgs(args)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		l.t.Fatalf("aoctl %s: %v: %s%s", strings.Join(args, " "), err, out, errb.Bytes())
	}
	return string(out)
}

// aoctlJSON runs aoctl and decodes what it printed into v.
func (l *testbed) aoctlJSON(v any, args ...string) {
	l.t.Helper()
	out := l.aoctlOK(args...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		l.t.Fatalf("aoctl %s: %v:\n%s", strings.Join(args, " "), err, out)
	}
}

// aoctlRun is an aoctl command running in the background, its output read
// while it runs.
type aoctlRun struct {
	args     string
	cmd      *exec.Cmd
	out, err testkit.SyncBuffer
	done     chan struct{}
}

// startAoctl starts aoctl; ctx ending kills it.
func (l *testbed) startAoctl(ctx context.Context, args ...string) *aoctlRun {
	l.t.Helper()
	r := &aoctlRun{args: strings.Join(args, " "), done: make(chan struct{})}
	r.cmd = exec.CommandContext(ctx, lab.MustBin(l.t, "aoctl"), l.aoctlArgs(args)...)
	r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.err
	r.cmd.WaitDelay = 10 * time.Second
	if err := r.cmd.Start(); err != nil {
		l.t.Fatalf("aoctl %s: %v", r.args, err)
	}
	go func() {
		_ = r.cmd.Wait()
		close(r.done)
	}()
	l.t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			_ = r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// wait waits for the command to end and returns its exit status (-1 when
// a signal ended it); not ending within timeout fails the test.
func (r *aoctlRun) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		t.Fatalf("aoctl %s did not end within %s; it printed:\n%s", r.args, timeout, r)
	}
	return r.cmd.ProcessState.ExitCode()
}

// running fails the test when the command already ended.
func (r *aoctlRun) running(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
		t.Fatalf("aoctl %s ended early (exit %d):\n%s", r.args, r.cmd.ProcessState.ExitCode(), r)
	default:
	}
}

func (r *aoctlRun) stdout() string { return r.out.String() }
func (r *aoctlRun) stderr() string { return r.err.String() }

func (r *aoctlRun) String() string {
	return fmt.Sprintf("aoctl %s: stdout:\n%s\nstderr:\n%s", r.args, r.stdout(), r.stderr())
}

// watchReports are the reports `aoctl --json status --watch` printed, one
// JSON object a line (a last line still being written is left out).
func watchReports(t *testing.T, out string) []control.StatusReport {
	t.Helper()
	var reps []control.StatusReport
	dec := json.NewDecoder(strings.NewReader(out))
	for {
		var rep control.StatusReport
		err := dec.Decode(&rep)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return reps
		}
		if err != nil {
			t.Fatalf("aoctl --json status --watch printed something else than status reports: %v:\n%s", err, out)
		}
		reps = append(reps, rep)
	}
}

// currentOf is the SendID of peer's Current_key in rep, 0 for none.
func currentOf(rep control.StatusReport, peer string) uint8 {
	for _, p := range rep.Peers {
		if p.Peer != peer {
			continue
		}
		for _, k := range p.Keys {
			if k.Current {
				return k.SendID
			}
		}
	}
	return 0
}

func currents(reps []control.StatusReport, peer string) []uint8 {
	var out []uint8
	for _, r := range reps {
		out = append(out, currentOf(r, peer))
	}
	return out
}

func chainKeyIs(c *control.ChainKey, k key) bool {
	return c != nil && c.Name == k.name() && c.SendID == k.sendID() && c.RecvID == k.recvID()
}

func hasChainKey(ks []control.ChainKey, k key) bool {
	return slices.ContainsFunc(ks, func(c control.ChainKey) bool { return chainKeyIs(&c, k) })
}

// ids is k's SEND/RECV column.
func ids(k key) string { return fmt.Sprintf("%d/%d", k.sendID(), k.recvID()) }

// rowOf is the fields of the first line of out whose first field is
// first, nil when none is.
func rowOf(out, first string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

func hasLinePrefix(out, prefix string) bool {
	return slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// stepLines are the step lines aoctl rotate --wait printed for peer:
// "TIME  PEER  STEP  what happened".
func stepLines(out, peer string) []string {
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != peer {
			continue
		}
		if _, err := time.Parse(time.RFC3339, f[0]); err == nil {
			lines = append(lines, line)
		}
	}
	return lines
}

// stepsOf are the steps of stepLines.
func stepsOf(out, peer string) []control.RollStepKind {
	var steps []control.RollStepKind
	for _, line := range stepLines(out, peer) {
		steps = append(steps, control.RollStepKind(strings.Fields(line)[2]))
	}
	return steps
}

// isSubsequence reports whether want appears in got in order.
func isSubsequence[T comparable](want, got []T) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

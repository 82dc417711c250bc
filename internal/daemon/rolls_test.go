package daemon_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/bgp"
	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// GET /v1/rolls follows a rotation step by step: after the sequence number
// the rotate answered with come the roll's started, announced (the new
// key, named), switched and completed, each when the peer took it; a
// request with nothing new waits for the next step, and the session going
// down is a step too.
func TestRollsFollowARotation(t *testing.T) { synctest.Test(t, testRollsFollowARotation) }

func testRollsFollowARotation(t *testing.T) {
	_, k1, _, k3 := testKeys()
	e := newEnv(t, envOptions{keys: []testKey{k1, k3}})
	e.waitKeys("listener", e.lis, ids(k1, k3))
	e.up(ids(k1, k3), k3, k1)
	ctx := context.Background()
	res, err := e.d.Rotate(ctx, control.RotateRequest{Peer: peerAddr.String()})
	if err != nil || len(res.Peers) != 1 || !res.Peers[0].Started {
		t.Fatalf("Rotate: %+v, %v", res, err)
	}
	req := control.RollsRequest{Peer: peerAddr.String(), After: res.Peers[0].Seq}
	// The peer moves to k3 once our RNext asks for it.
	r := k3.send
	if err := e.client.SetInfo(tcpao.InfoChange{RNext: &r}); err != nil {
		t.Fatal(err)
	}
	var steps []control.RollStep
	e.waitFor("the roll to complete", func() bool {
		if err := e.net.Exchange(e.acc, e.client, 1); err != nil {
			t.Fatalf("exchange during the roll: %v", err)
		}
		rep, err := e.d.Rolls(ctx, req)
		if err != nil {
			t.Fatalf("Rolls: %v", err)
		}
		steps = append(steps, rep.Steps...)
		req.After = rep.Last
		return slices.ContainsFunc(steps, func(s control.RollStep) bool { return s.Step == control.RollCompleted })
	})
	var kinds []control.RollStepKind
	for _, s := range steps {
		kinds = append(kinds, s.Step)
		switch s.Step {
		case control.RollAnnounced, control.RollSwitched, control.RollCompleted:
			if s.Key == nil || s.Key.String() != "core/"+k3.name {
				t.Errorf("%s names key %v, want core/%s", s.Step, s.Key, k3.name)
			}
		}
	}
	want := []control.RollStepKind{control.RollStarted, control.RollAnnounced, control.RollSwitched, control.RollCompleted}
	if !slices.Equal(kinds, want) {
		t.Fatalf("steps %v, want %v", kinds, want)
	}

	// Nothing new: a request waits its time for a step, then answers
	// none; the session going down is the next step, and wakes it.
	start := time.Now()
	rep, err := e.d.Rolls(ctx, control.RollsRequest{Peer: peerAddr.String(), After: req.After, Wait: 5 * time.Second})
	if err != nil || len(rep.Steps) != 0 || time.Since(start) != 5*time.Second || rep.Last != req.After {
		t.Fatalf("a quiet wait: %+v, %v after %s; want no step after 5s", rep, err, time.Since(start))
	}
	got := make(chan control.RollsReport, 1)
	go func() {
		rep, _ := e.d.Rolls(ctx, control.RollsRequest{Peer: peerAddr.String(), After: req.After, Wait: time.Minute})
		got <- rep
	}()
	time.Sleep(time.Second)
	down := e.session
	down.State = bgp.StateIdle
	down.About = &bgp.PeerAbout{LastDown: time.Now(), LastDownReason: "Hold timer expired"}
	e.sp.Set(down)
	rep = <-got
	if len(rep.Steps) == 0 || rep.Steps[0].Step != control.RollSessionDown || rep.Steps[0].Reason != "Hold timer expired" {
		t.Fatalf("after the session went down: %+v, want a session-down step", rep)
	}
	if _, err := e.d.Rolls(ctx, control.RollsRequest{Peer: "192.0.2.99"}); err == nil {
		t.Error("Rolls of a peer aokeyd does not manage answered")
	}
}

package birdnative

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// TestDriverRevokeScoped: a revoke scoped to one peer takes the key out
// of that neighbor's file however the request spells the peer's address
// (a mapped IPv4 address is the same peer), leaves the key source alone,
// and is recorded once, naming the peer as it is; a scope naming another
// VRF of that address leaves the neighbor alone; a peer that is no
// address is refused and nothing is recorded.
func TestDriverRevokeScoped(t *testing.T) {
	for _, spelling := range []string{"192.0.2.2", "::ffff:192.0.2.2"} {
		t.Run(spelling, func(t *testing.T) {
			d, _, kf := newTestDriver(t, "k1", "k2")
			ctx, _ := runDriver(t, d)
			file := filepath.Join(d.o.Dir, "192.0.2.2.conf")

			if _, err := d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1", Peer: "bogus"}); !errors.Is(err, control.ErrInvalid) {
				t.Errorf("a revoke for peer bogus: %v, want control.ErrInvalid", err)
			}
			if _, err := d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1", Peer: spelling, VRF: "red"}); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(file); !strings.Contains(string(b), "send id 1;") {
				t.Fatalf("a revoke scoped to vrf red took k1 from the default VRF's neighbor:\n%s", b)
			}
			if _, err := d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1", Peer: spelling}); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(file); strings.Contains(string(b), "send id 1;") || !strings.Contains(string(b), "send id 2;") {
				t.Fatalf("file after the scoped revoke:\n%s", b)
			}
			if k, _ := os.ReadFile(kf); strings.Contains(string(k), "revoked") {
				t.Error("a peer-scoped revoke wrote the key source")
			}
			b, err := os.ReadFile(d.o.RevocationsFile)
			if err != nil {
				t.Fatal(err)
			}
			var rs []map[string]string
			if err := json.Unmarshal(b, &rs); err != nil {
				t.Fatal(err)
			}
			if len(rs) != 2 || rs[0]["peer"] != "192.0.2.2 vrf red" || rs[1]["peer"] != "192.0.2.2" {
				t.Errorf("record %s, want the two scoped revocations, each naming its peer", b)
			}
		})
	}
}

// TestRevokeElapsedCountsTheWait: a revoke that arrives while the
// driver's loop is busy (here: the test is the loop, and takes the
// request only after busy) reports its Elapsed from the request, the wait
// included, as control.RevokeResult documents: the guest's
// bird-native-revoke line measured only the work after the wait, and a
// revoke that waited 30 s behind the loop looked like any other.
func TestRevokeElapsedCountsTheWait(t *testing.T) {
	const busy = 300 * time.Millisecond
	d, _, _ := newTestDriver(t, "k1", "k2")
	ctx := context.Background()
	d.refresh(ctx)
	d.pass(ctx, nil, false)
	type answer struct {
		res control.RevokeResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := d.Revoke(ctx, control.RevokeRequest{Chain: "core", Key: "k1"})
		got <- answer{res, err}
	}()
	a := <-d.revokes
	time.Sleep(busy) // the loop finishes what it was doing
	a.done <- d.revokeNow(ctx, a)
	ans := <-got
	if ans.err != nil {
		t.Fatal(ans.err)
	}
	if el := time.Duration(ans.res.Elapsed); el < busy {
		t.Errorf("Elapsed %v, want at least the %v the request waited for the loop", el, busy)
	}
}

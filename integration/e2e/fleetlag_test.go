package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/fleet"
)

// fleetLagFlagged waits for the fleet view to flag g4 on its links to g3
// and g5 after the key lagKey was written (at written) to every router's
// source but g4's, and measures:
//
//   - announce: from the write to the later of g3 and g5 announcing the
//     key to g4 (their roll entering "announced" with it, by their own
//     clock, from their published documents): their key source's next
//     read (up to one refresh) and the roll's install and announce;
//   - flag: from that announcement to the flag in the fleet view: the
//     later of g3's and g5's documents that carry it, as their publishers
//     stamped them (the publisher's wake, at most a quarter refresh after
//     its last round, and its status build; the Vault write follows at
//     once). This is the "flagged within one refresh", and the
//     test's bound. The test sees the flag by reading the view the way
//     `aoctl fleet status` does (fleet.Store Statuses and fleet.Join)
//     every 50 ms; that read's own time is logged, not bounded: beside
//     the FRR scenarios in the two emulated vCPUs it took 0.6 s on its
//     own (a flag published 686 ms after the announce read at 1,305 ms).
//
// aoctl's own start-up (about 2 s in the TCG guest) is left out of both:
// the test runs `aoctl fleet status` once afterwards for the table.
//
// It returns the bounds missed, for the caller to report last: a CI log
// shows the failed test's last messages, and the fleet table logged after
// this check would push them out.
func fleetLagFlagged(t *testing.T, st fleet.Store, written time.Time, lagKey fleetKey, logOf func(router string) string) (missed []string) {
	t.Helper()
	ref := "core/" + lagKey.name
	var announced, published, flagged time.Time
	var last, detail string
	deadline := written.Add(30 * time.Second)
	for flagged.IsZero() {
		if time.Now().After(deadline) {
			t.Fatalf("the links to the lagging g4 not flagged within 30s of the write: %s", last)
		}
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		docs, _, err := st.Statuses(ctx)
		cancel()
		if err != nil {
			last = err.Error()
			continue
		}
		now := time.Now()
		links := fleet.Join(docs, fleet.JoinOptions{Now: now, Horizon: 7 * 24 * time.Hour})
		var got, parts []string
		var at, pub []time.Time
		for _, far := range []string{"g3", "g5"} {
			l := fleetLinkOf(links, far, "g4")
			if l == nil {
				continue
			}
			for _, f := range l.Flags {
				if f.Kind == fleet.AnnouncedNotHeld && f.Router == "g4" && f.Key == ref {
					got = append(got, far)
				}
			}
			e := l.A
			if l.B.Router == far {
				e = *l.B
			}
			if e.Peer.Roll.PendingKey == ref && e.Peer.Roll.State == "announced" {
				at = append(at, e.Peer.Roll.Since)
				pub = append(pub, e.PublishedAt)
				parts = append(parts, fmt.Sprintf("%s announced %s, published %s", far,
					e.Peer.Roll.Since.Format("15:04:05.000"), e.PublishedAt.Format("15:04:05.000")))
			}
		}
		last = fmt.Sprintf("flagged at %v", got)
		if len(got) == 2 && len(at) == 2 {
			flagged, announced, published = now, at[0], pub[0]
			detail = strings.Join(parts, "; ")
			if at[1].After(announced) {
				announced = at[1]
			}
			if pub[1].After(published) {
				published = pub[1]
			}
		}
	}
	t.Logf("fleet-lag: %s; flag read %s (write %s)", detail, flagged.Format("15:04:05.000"), written.Format("15:04:05.000"))
	// The longest round of the far ends' publishers around the announce
	// (its status build and document write): a round under way when the
	// announce came ends first, and the next one builds and writes the
	// document that carries it.
	var slowestRound time.Duration
	for _, far := range []string{"g3", "g5"} {
		// Where the far ends' time went: their announce and the
		// publisher's rounds around it (debug log).
		var lines []string
		for _, l := range strings.Split(lab.Tail(logOf(far), 256<<10), "\n") {
			if strings.Contains(l, `"fleet: round"`) || strings.Contains(l, "announced new key") {
				lines = append(lines, l)
			}
		}
		lines = lines[max(0, len(lines)-12):]
		for _, l := range lines {
			if r, ok := fleetRoundOf(l); ok {
				slowestRound = max(slowestRound, r.status+r.publish)
			}
		}
		t.Logf("fleet-lag: %s's announce and publisher rounds (last %d):\n%s", far, len(lines), strings.Join(lines, "\n"))
	}
	toFlag := published.Sub(announced)
	fmt.Printf("fleet-lag: announce_to_flag_ms=%d write_to_announce_ms=%d write_to_flag_ms=%d read_ms=%d refresh_ms=%d slowest_round_ms=%d\n",
		toFlag.Milliseconds(), announced.Sub(written).Milliseconds(), published.Sub(written).Milliseconds(),
		flagged.Sub(published).Milliseconds(), fleetRefresh.Milliseconds(), slowestRound.Milliseconds())
	// The bound: one refresh. The publisher writes a woken
	// round's document beside its revocation-record read (not after it)
	// and its status reads no fingerprints; before, an announce during a
	// round waited for that round and the next one's record read, status
	// and write (1,170 ms in a clean-clone make test beside the FRR
	// scenarios, rounds of 0.5-0.6 s).
	//
	// The bound holds on a loaded emulated machine: one refresh, plus
	// the longest round of the far ends' publishers then (its status
	// build and write: tens of ms on a quiet machine, where the bound is
	// the refresh; a busy host's run: a round of 1,203 ms status and
	// 467 ms write, toFlag 1,151 ms; before, the bound added the write
	// alone and a clean-clone CI run beside the field guest missed it).
	if limit := fleetRefresh + slowestRound; toFlag > limit || toFlag < 0 {
		missed = append(missed, fmt.Sprintf("g4 flagged %s after g3 and g5 announced %s to it, want within one refresh (%s) and the slowest round's status and write then (%s)",
			toFlag, ref, fleetRefresh, slowestRound))
	}
	// The far ends read the key at their next refresh; the roll's install
	// and announce take a few hundred ms in the TCG guest; then the flag's
	// round, as above.
	if limit := 2*fleetRefresh + 2*time.Second + slowestRound; flagged.Sub(written) > limit {
		missed = append(missed, fmt.Sprintf("g4 flagged %s after the write, want within %s (one refresh to read the key, 2 s for the announce, one refresh and the slowest round (%s) to flag)",
			flagged.Sub(written), limit, slowestRound))
	}
	return missed
}

func fleetLinkOf(links []fleet.Link, a, b string) *fleet.Link {
	for i, l := range links {
		if l.B != nil && (l.A.Router == a && l.B.Router == b || l.A.Router == b && l.B.Router == a) {
			return &links[i]
		}
	}
	return nil
}

// slowestFleetRound is the longest publisher round (its revocation read
// and apply beside its document's build and write, whichever took
// longer) among the last rounds the aokeyd logs at paths recorded.
func slowestFleetRound(paths []string) time.Duration {
	var slowest time.Duration
	for _, p := range paths {
		lines := strings.Split(lab.Tail(p, 256<<10), "\n")
		for _, l := range lines[max(0, len(lines)-400):] {
			if r, ok := fleetRoundOf(l); ok {
				slowest = max(slowest, r.revocations+r.apply, r.status+r.publish)
			}
		}
	}
	return slowest
}

// fleetRound is one "fleet: round" debug line's step times.
type fleetRound struct{ revocations, apply, status, publish time.Duration }

// fleetRoundOf parses line as a publisher round's debug line.
func fleetRoundOf(line string) (fleetRound, bool) {
	var r struct {
		Msg           string `json:"msg"`
		RevocationsMS int64  `json:"revocations_ms"`
		ApplyMS       int64  `json:"apply_ms"`
		StatusMS      int64  `json:"status_ms"`
		PubMS         int64  `json:"publish_ms"`
	}
	if json.Unmarshal([]byte(line), &r) != nil || r.Msg != "fleet: round" {
		return fleetRound{}, false
	}
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	return fleetRound{ms(r.RevocationsMS), ms(r.ApplyMS), ms(r.StatusMS), ms(r.PubMS)}, true
}

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// rotateWaitReport is `aoctl rotate --wait --json`.
type rotateWaitReport struct {
	Rotate control.RotateResult `json:"rotate"`
	Rolls  []rollFollowed       `json:"rolls"`
}

// rollResult is how a followed roll ended.
type rollResult string

const (
	rollCompleted   rollResult = "completed"
	rollAborted     rollResult = "aborted"
	rollSessionDown rollResult = "session-down"
	rollTimedOut    rollResult = "timeout"   // no end within the bound
	rollUnfollowed  rollResult = "unknown"   // the daemon could not be asked
	rollInterrupted rollResult = "interrupt" // aoctl was stopped
)

// rollFollowed is one peer's roll as rotate --wait followed it.
type rollFollowed struct {
	Peer   string             `json:"peer"`
	VRF    string             `json:"vrf,omitempty"`
	Steps  []control.RollStep `json:"steps"`
	Result rollResult         `json:"result"`
	Error  string             `json:"error,omitempty"`
	next   uint64
	// started: this roll's "started" step came. Before it, a roll step
	// is the tail of the roll the peer was in when aoctl asked (its
	// completion can land between the request and this roll's start),
	// not this roll's: it is neither shown nor taken as the end.
	started bool
}

// rollPoll is how often rotate --wait asks about each of several rolls;
// one roll is followed with a request the daemon holds until a step
// (at most rollHold).
const (
	rollPoll = time.Second
	rollHold = 20 * time.Second
)

// followRolls follows each roll res started until it ends or bound passes,
// printing each step as the peer takes it (unless --json). ok: every roll
// completed.
func (a *app) followRolls(ctx context.Context, res control.RotateResult, bound time.Duration) ([]rollFollowed, bool) {
	var rolls []*rollFollowed
	for _, p := range res.Peers {
		if p.Started && p.Error == "" {
			rolls = append(rolls, &rollFollowed{Peer: p.Peer, VRF: p.VRF, Steps: []control.RollStep{}, next: p.Seq})
		}
	}
	if len(rolls) == 0 {
		if !a.json {
			fmt.Fprintln(a.stdout, "No roll started: nothing to wait for.")
		}
		return []rollFollowed{}, true
	}
	start := a.now()
	deadline := start.Add(bound)
	if !a.json {
		what := "the roll"
		if len(rolls) > 1 {
			what = fmt.Sprintf("%d rolls", len(rolls))
		}
		fmt.Fprintf(a.stdout, "\nFollowing %s (up to %s):\n", what, human(bound))
	}
	open := len(rolls)
	for open > 0 {
		left := deadline.Sub(a.now())
		if left <= 0 || ctx.Err() != nil {
			break
		}
		hold := time.Duration(0)
		if open == 1 {
			hold = min(left, rollHold, a.timeout*3/4)
		}
		asked := false
		for _, r := range rolls {
			if r.Result != "" {
				continue
			}
			asked = true
			rep, err := a.daemon().Rolls(ctx, control.RollsRequest{Peer: r.Peer, VRF: r.VRF, After: r.next, Wait: hold})
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				r.Result, r.Error = rollUnfollowed, err.Error()
				open--
				fmt.Fprintf(a.stderr, "aoctl rotate: following %s: %v\n", peerLabel(r.Peer, r.VRF), err)
				if errors.Is(err, control.ErrNotFound) {
					fmt.Fprintln(a.stderr, "(an aokeyd older than this aoctl does not report the steps of its rolls: aoctl status shows the rotation)")
				}
				continue
			}
			r.next = max(r.next, rep.Last)
			for _, s := range rep.Steps {
				r.started = r.started || s.Step == control.RollStarted
				if !r.started && s.Step != control.RollSessionDown && s.Step != control.RollSessionUp {
					continue // the earlier roll's (rollFollowed.started)
				}
				r.Steps = append(r.Steps, s)
				if !a.json {
					fmt.Fprintln(a.stdout, stepLine(r, s))
				}
				if ends, _ := s.Step.Ends(); ends && r.Result == "" {
					r.Result = endOf(s.Step)
					open--
				}
			}
		}
		if open > 0 && (hold == 0 || !asked) {
			select {
			case <-ctx.Done():
			case <-time.After(min(rollPoll, max(deadline.Sub(a.now()), 0))):
			}
		}
	}
	all := true
	out := make([]rollFollowed, len(rolls))
	for i, r := range rolls {
		if r.Result == "" {
			r.Result = rollTimedOut
			if ctx.Err() != nil {
				r.Result = rollInterrupted
			}
		}
		all = all && r.Result == rollCompleted
		out[i] = *r
		if !a.json {
			fmt.Fprintln(a.stdout, resultLine(*r, start, a.now(), bound))
		}
	}
	return out, all
}

// endOf is the result of a roll that ended with step k.
func endOf(k control.RollStepKind) rollResult {
	switch k {
	case control.RollCompleted:
		return rollCompleted
	case control.RollSessionDown:
		return rollSessionDown
	}
	return rollAborted
}

// stepLine is one step as rotate --wait prints it.
func stepLine(r *rollFollowed, s control.RollStep) string {
	key := "the new key"
	if s.Key != nil {
		key = s.Key.String()
	}
	var what string
	switch s.Step {
	case control.RollStarted:
		what = "roll started"
	case control.RollAnnounced:
		what = key + " installed and announced with RNext: waiting for the peer to send with it"
	case control.RollSwitched:
		what = "the peer sends with " + key + ": it is Current_key; the old keys go after the grace period, once unused"
	case control.RollCompleted:
		what = "old keys retired: roll completed"
		if s.Key != nil {
			what += ", sending with " + key
		}
	case control.RollAborted:
		// A roll aoctl rotate started is not retried (aokeyd's early.go):
		// the schedule governs again.
		what = fmt.Sprintf("roll aborted (%s): %s; the old key is kept and the roll is not retried", dash(s.Reason), dash(s.Detail))
	case control.RollReplanned:
		what = "the desired keys changed: aokeyd plans the roll again"
	case control.RollSessionDown:
		what = "session went down; the roll ends with it"
		if s.Reason != "" {
			what = fmt.Sprintf("session went down (%s); the roll ends with it", s.Reason)
		}
	case control.RollSessionUp:
		what = "new session"
	default:
		what = string(s.Step)
	}
	return fmt.Sprintf("%s  %s  %-12s  %s", stamp(s.At), peerLabel(r.Peer, r.VRF), s.Step, what)
}

// rotateArgs names a peer on aoctl rotate's command line.
func rotateArgs(peer, vrf string) string {
	if vrf != "" {
		return peer + " --vrf " + vrf
	}
	return peer
}

// resultLine is how a followed roll ended.
func resultLine(r rollFollowed, start, now time.Time, bound time.Duration) string {
	p := peerLabel(r.Peer, r.VRF)
	took := now.Sub(start)
	if n := len(r.Steps); n > 0 {
		took = r.Steps[n-1].At.Sub(start)
	}
	switch r.Result {
	case rollCompleted:
		return fmt.Sprintf("%s: roll completed in %s", p, human(took))
	case rollAborted, rollSessionDown:
		return fmt.Sprintf("%s: roll FAILED (%s): not retried, the schedule governs again (aoctl rotate %s to try again)", p, r.Result, rotateArgs(r.Peer, r.VRF))
	case rollTimedOut:
		return fmt.Sprintf("%s: roll did not end within %s; it goes on (aoctl status %s)", p, human(bound), r.Peer)
	case rollInterrupted:
		return fmt.Sprintf("%s: stopped following after %s; the roll goes on (aoctl status %s)", p, human(took), r.Peer)
	}
	return fmt.Sprintf("%s: %s", p, strings.TrimSpace(string(r.Result)+" "+r.Error))
}

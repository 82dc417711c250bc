package control

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// RollStepKind names one step of a peer's roll, as aoctl rotate --wait
// prints it.
type RollStepKind string

// The steps of a roll, in the order a roll takes them, and what ends one.
const (
	// RollStarted: the roll's first write towards the new key.
	RollStarted RollStepKind = "started"
	// RollAnnounced: the new key is installed and announced with RNext;
	// the peer is to send with it (within the policy's switch timeout).
	RollAnnounced RollStepKind = "announced"
	// RollSwitched: the peer sends with the new key (or its RNext made it
	// Current_key): it is current; the old keys go after the grace period,
	// once their pkt_good stops rising.
	RollSwitched RollStepKind = "switched"
	// RollCompleted: the old keys are retired. The roll succeeded.
	RollCompleted RollStepKind = "completed"
	// RollAborted: the roll gave up (Reason says why, with the words of
	// the rotations_aborted_total reason label): the old key is kept and
	// RNext put back. aokeyd retries a scheduled roll later, not one
	// aoctl rotate started (the schedule governs again). The roll failed.
	RollAborted RollStepKind = "aborted"
	// RollReplanned: the roll stopped short of completing because the
	// desired keys changed; aokeyd plans again (a new roll may start).
	RollReplanned RollStepKind = "replanned"
	// RollSessionDown: the session went down; its roll ends with it.
	// Reason is the speaker's word for why, when it says.
	RollSessionDown RollStepKind = "session-down"
	// RollSessionUp: a new session; aokeyd starts watching it.
	RollSessionUp RollStepKind = "session-up"
)

// Ends reports whether the step ends a roll, and whether in success.
func (k RollStepKind) Ends() (ends, ok bool) {
	switch k {
	case RollCompleted:
		return true, true
	case RollAborted, RollSessionDown:
		return true, false
	}
	return false, false
}

// RollStep is one step of a peer's roll. It names keys, never holds
// their material.
type RollStep struct {
	// Seq orders the steps of every peer: a RollsRequest after Seq gets
	// the steps taken since.
	Seq  uint64       `json:"seq"`
	At   time.Time    `json:"at"`
	Step RollStepKind `json:"step"`
	// State is the peer's rotation state after the step.
	State string `json:"state"`
	// Key is the key the step is about: the key announced, switched to,
	// sent with once completed.
	Key    *KeyName `json:"key,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Detail string   `json:"detail,omitempty"`
}

// RollsRequest is GET /v1/rolls: the steps of Peer's rolls (an address, or
// peer.Key's text with the VRF) after sequence number After, waiting up to
// Wait for one when there is none yet.
type RollsRequest struct {
	Peer  string
	VRF   string
	After uint64
	Wait  time.Duration
}

// MaxRollsWait bounds how long GET /v1/rolls waits for a step (and so does
// half the server's WriteTimeout).
const MaxRollsWait = 30 * time.Second

// RollsReport is the answer to a RollsRequest: the steps after After, in
// order (none when Wait passed without one), and Last, the sequence number
// to ask after next time.
type RollsReport struct {
	Peer  string     `json:"peer"`
	VRF   string     `json:"vrf,omitempty"`
	Steps []RollStep `json:"steps"`
	Last  uint64     `json:"last"`
}

// RollWatcher is a Backend that reports the steps of its peers' rolls (GET
// /v1/rolls, aoctl rotate --wait). A Backend that is none answers 404.
type RollWatcher interface {
	Rolls(ctx context.Context, req RollsRequest) (RollsReport, error)
}

func (s *Server) rolls(w http.ResponseWriter, r *http.Request) {
	rw, ok := s.o.Backend.(RollWatcher)
	if !ok {
		s.fail(w, r, fmt.Errorf("%w: this aokeyd does not report the steps of its rolls", ErrNotFound))
		return
	}
	q := r.URL.Query()
	req := RollsRequest{Peer: q.Get("peer"), VRF: q.Get("vrf")}
	err := checkStatusPeer(req.Peer)
	if err == nil && req.VRF != "" {
		err = checkTarget(req.Peer, req.VRF)
	}
	if err == nil && req.Peer == "" {
		err = fmt.Errorf("%w: name a peer", ErrInvalid)
	}
	if v := q.Get("after"); err == nil && v != "" {
		if req.After, err = strconv.ParseUint(v, 10, 64); err != nil {
			err = fmt.Errorf("%w: after: want a sequence number", ErrInvalid)
		}
	}
	if v := q.Get("wait"); err == nil && v != "" {
		var secs float64
		if secs, err = strconv.ParseFloat(v, 64); err != nil || secs < 0 {
			err = fmt.Errorf("%w: wait: want a number of seconds", ErrInvalid)
		}
		// Held well within the answer's write timeout, however short
		// control.write_timeout is set.
		req.Wait = min(time.Duration(secs*float64(time.Second)), MaxRollsWait, s.o.WriteTimeout/2)
	}
	var rep RollsReport
	if err == nil {
		rep, err = rw.Rolls(r.Context(), req)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rep.Steps == nil {
		rep.Steps = []RollStep{}
	}
	writeJSON(w, rep)
}

// Rolls is GET /v1/rolls.
func (c *Client) Rolls(ctx context.Context, req RollsRequest) (RollsReport, error) {
	v := url.Values{"peer": {req.Peer}, "after": {strconv.FormatUint(req.After, 10)},
		"wait": {strconv.FormatFloat(req.Wait.Seconds(), 'f', -1, 64)}}
	if req.VRF != "" {
		v.Set("vrf", req.VRF)
	}
	var r RollsReport
	return r, c.do(ctx, http.MethodGet, "/v1/rolls?"+v.Encode(), nil, &r)
}

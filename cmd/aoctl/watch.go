package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/internal/control"
)

// defaultWatchInterval is status --watch's --interval.
const defaultWatchInterval = 2 * time.Second

// watchStatus asks for which's status every interval and prints it when
// what it shows changed (every: each time), until ctx ends (Ctrl-C), which
// is no failure. A daemon that stops answering is said so once, and
// watched for until it answers again.
func (a *app) watchStatus(ctx context.Context, which string, v statusView, interval time.Duration, every bool) int {
	var last []byte
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return exitOK
			case <-time.After(interval):
			}
		}
		rep, err := a.daemon().Status(ctx, which)
		if ctx.Err() != nil {
			return exitOK
		}
		var seen []byte
		if err != nil {
			seen = []byte("error: " + err.Error())
		} else {
			seen = watchedOf(rep, v)
		}
		if !every && bytes.Equal(seen, last) {
			continue
		}
		last = seen
		now := a.now()
		switch {
		case err != nil && a.json:
			_ = json.NewEncoder(a.stderr).Encode(map[string]string{"at": stamp(now), "error": err.Error()})
		case err != nil:
			fmt.Fprintf(a.stdout, "=== %s: aoctl status: %v\n", stamp(now), err)
		case a.json:
			enc := json.NewEncoder(a.stdout)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(v.jsonOf(rep)); err != nil {
				fmt.Fprintf(a.stderr, "aoctl status: %v\n", err)
				return exitError
			}
		default:
			fmt.Fprintf(a.stdout, "=== %s (every %s, Ctrl-C ends)\n", stamp(now), human(interval))
			v.render(a.stdout, rep, now)
			fmt.Fprintln(a.stdout)
		}
	}
}

// watchedOf is what status --watch compares between two reports: the
// report without its counters and clocks (generation time, key source age
// and sync, uptimes, the rotation's next step time), which change on
// every ask without anything an operator watches for having changed.
func watchedOf(rep control.StatusReport, v statusView) []byte {
	rep.GeneratedAt = time.Time{}
	rep.KeySource.Age, rep.KeySource.LastSync = 0, time.Time{}
	peers := make([]control.PeerStatus, len(rep.Peers))
	for i, p := range rep.Peers {
		p.Uptime, p.Counters, p.Listener = 0, control.Counters{}, nil
		p.Rotation.NextAt = time.Time{}
		keys := make([]control.Key, len(p.Keys))
		for j, k := range p.Keys {
			k.PktGood, k.PktBad = 0, 0
			keys[j] = k
		}
		p.Keys = keys
		peers[i] = p
	}
	rep.Peers = peers
	if v.keys {
		rep = control.StatusReport{Chains: rep.Chains}
	}
	b, _ := json.Marshal(rep)
	return b
}

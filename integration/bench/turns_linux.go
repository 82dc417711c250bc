//go:build linux

package bench

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// turnsRun is item 2's kernel-time comparison (cfg.Turns > 0, largest N):
// the raw loop and SyncListener take turns rotating ONE listener, each
// turn retiring the newest installed key first (the raw loop in the order
// the kernel lists its keys, read before its timed window; SyncListener
// reads the list itself), each turn settled first. On fresh listeners
// (the repetitions) the raw loop's own kernel time moved up to 42%
// between repetitions of one run, and which list a rotator met moved the
// ratio as much as the rotator did (the cross pass); on one listener both
// meet the same lists, the same slab and the same host drift.
func (r *runner) turnsRun(ctx context.Context, n int, s *Size) error {
	l, steps, _, err := r.rawInstalled(ctx, n, "turns: install")
	if err != nil {
		return err
	}
	defer l.close()
	opts := rotator.ListenerOptions{PeersPerBatch: r.cfg.PeersPerBatch, OptMemMax: func() (int, error) { return r.limit, nil }}
	for i := range r.cfg.Turns {
		if err := ctx.Err(); err != nil {
			return err
		}
		from, to := uint8(i+1), uint8(i+2)
		var t timing
		if turnWho(i) {
			d, err := r.desired(n, to)
			if err != nil {
				return err
			}
			settle(n)
			t, err = r.syncTimed(l, d, opts)
			zeroDesired(d)
			if err != nil {
				return fmt.Errorf("bench: turn %d: aokeyd rotate N=%d: %w", i, n, err)
			}
			s.TurnsAokeyd, s.TurnsAokeydSys, s.TurnsAokeydGC = append(s.TurnsAokeyd, t.el), append(s.TurnsAokeydSys, t.sys), append(s.TurnsAokeydGC, t.gc)
		} else {
			keys, err := l.sock.Keys(tcpao.KeyFilter{})
			if err != nil {
				return fmt.Errorf("bench: turn %d: list: %w", i, err)
			}
			listed := make([]netip.Prefix, len(keys)) // newest installed first
			for j, k := range keys {
				listed[j] = k.Peer
			}
			if steps, err = r.rawSteps(steps[:0], listed, from, to); err != nil {
				return err
			}
			settle(n)
			if t, err = r.raw(l, steps); err != nil {
				return fmt.Errorf("bench: turn %d: raw rotate N=%d: %w", i, n, err)
			}
			s.TurnsRaw, s.TurnsRawSys, s.TurnsRawGC = append(s.TurnsRaw, t.el), append(s.TurnsRawSys, t.sys), append(s.TurnsRawGC, t.gc)
		}
		if err := verify(l, n, to, fmt.Sprintf("turn %d", i)); err != nil {
			return err
		}
		r.log.Info("turn", "n", n, "turn", i, "aokeyd", turnWho(i), "took", time.Duration(t.el), "sys", time.Duration(t.sys), "gc", t.gc)
	}
	return nil
}

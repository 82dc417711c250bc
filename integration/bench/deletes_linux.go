//go:build linux

package bench

// The kernel-side items: deleting keys from a loaded listener, where
// socket option memory runs out, and what a sock_diag domain costs.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
	"golang.org/x/sys/unix"
)

// deletes rolls the listener (IDs 2) back to IDs 1 with aokeyd's plan
// applied op by op (del_async, every delete timed, phases split), then runs
// the first Sample peers of the next roll (IDs 1 to 3) with synchronous
// deletes. Both passes see the key list in the same shape, so the sample
// positions are comparable.
func (r *runner) deletes(l *listener, n int, res *Results) error {
	d, err := r.desired(n, 1)
	if err != nil {
		return err
	}
	ph := Phases{N: n}
	batches, peak, err := r.plan(l, d, &ph)
	if err != nil {
		zeroDesired(d)
		return err
	}
	if n == r.maxN {
		res.OptMem.RotationPeak = peak
	}
	var ops []rotator.Op
	for _, b := range batches {
		ops = append(ops, b...)
	}
	adds, dels, err := r.applyTimed(l, ops)
	zeroDesired(d)
	if err != nil {
		return err
	}
	if err := verify(l, n, 1, "aokeyd async pass"); err != nil {
		return err
	}
	if len(dels) != n {
		return fmt.Errorf("bench: async pass N=%d: %d deletes, want %d", n, len(dels), n)
	}
	ph.Adds, ph.Dels = sum(adds), sum(dels)
	res.Phases = append(res.Phases, ph)
	sample := min(r.cfg.Sample, n)
	dl := Deletes{N: n, Sample: sample, AsyncDrain: sum(dels), AsyncAddMean: mean(adds), AsyncSampleMean: mean(dels[:sample])}
	r.log.Info("aokeyd async pass", "n", n, "async_drain", time.Duration(dl.AsyncDrain), "async_del_mean", time.Duration(mean(dels)))

	if d, err = r.desired(n, 3); err != nil {
		return err
	}
	batches, _, err = r.plan(l, d, nil)
	if err != nil {
		zeroDesired(d)
		return err
	}
	ops = ops[:0]
	peers := 0
collect:
	for _, b := range batches {
		for _, op := range b {
			if op.Kind == rotator.OpAdd {
				if peers == sample {
					break collect
				}
				peers++
			}
			if op.Kind == rotator.OpDel {
				if !op.Del.Async {
					zeroDesired(d)
					return fmt.Errorf("bench: aokeyd planned a synchronous delete on a listener: %s", op.Line())
				}
				op.Del.Async = false
			}
			ops = append(ops, op)
		}
	}
	_, dels, err = r.applyTimed(l, ops)
	zeroDesired(d)
	if err != nil {
		return err
	}
	if len(dels) != sample {
		return fmt.Errorf("bench: sync sample N=%d: %d deletes, want %d", n, len(dels), sample)
	}
	dl.SyncDelMean = mean(dels)
	res.Deletes = append(res.Deletes, dl)
	r.log.Info("aokeyd sync sample", "n", n, "sample", sample, "sync_del_mean", time.Duration(dl.SyncDelMean), "speedup", dl.Speedup())
	return nil
}

// optMemBoundary finds where the kernel answers ENOMEM under the default
// net.core.optmem_max, and checks that SyncListener refuses the largest key
// set up front without installing anything.
func (r *runner) optMemBoundary(ctx context.Context, def int) (OptMem, error) {
	a := r.cfg.Algorithm
	om := OptMem{Default: def, KeyBytes: tcpao.KeyOptMem(a), N: r.maxN, Needed: tcpao.OptMemNeeded(r.maxN, a),
		PredictedKeys: tcpao.OptMemMaxKeys(def, a)}
	l, err := listen(ctx)
	if err != nil {
		return om, err
	}
	limit := om.PredictedKeys + 256
	for i := range limit {
		b, err := r.fill()
		if err != nil {
			l.close()
			return om, err
		}
		st := []rawStep{rawAddStep(peer(i), string(a), 1, 1, b)}
		clear(b)
		_, err = r.raw(l, st)
		if errors.Is(err, unix.ENOMEM) {
			om.ENOMEM = true
			break
		}
		if err != nil {
			l.close()
			return om, fmt.Errorf("bench: optmem boundary: add %d: %w", i, err)
		}
		om.MeasuredKeys++
	}
	l.close()
	r.log.Info("optmem boundary", "default", def, "predicted_keys", om.PredictedKeys, "measured_keys", om.MeasuredKeys, "enomem", om.ENOMEM)

	if l, err = listen(ctx); err != nil {
		return om, err
	}
	defer l.close()
	d, err := r.desired(r.maxN, 1)
	if err != nil {
		return om, err
	}
	_, err = rotator.SyncListener(l.sock, d, rotator.ListenerOptions{PeersPerBatch: r.cfg.PeersPerBatch, OptMemMax: tcpao.OptMemMax})
	zeroDesired(d)
	if err != nil {
		om.Refusal = err.Error()
	}
	keys, kerr := l.sock.Keys(tcpao.KeyFilter{})
	om.RefusalClean = errors.Is(err, rotator.ErrOptMem) && (errors.Is(kerr, unix.ENOENT) || (kerr == nil && len(keys) == 0))
	return om, nil
}

// soDomainCost is one getsockopt(SO_DOMAIN), the call tcpao made before
// every AddKey/DelKey until it cached the family (mean of 10,000).
func soDomainCost(ctx context.Context) (int64, error) {
	l, err := listen(ctx)
	if err != nil {
		return 0, err
	}
	defer l.close()
	const n = 10000
	var el time.Duration
	var gerr error
	err = l.rc.Control(func(fd uintptr) {
		t0 := time.Now()
		for range n {
			if _, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN); gerr != nil {
				return
			}
		}
		el = time.Since(t0)
	})
	if err = errors.Join(err, gerr); err != nil {
		return 0, fmt.Errorf("bench: SO_DOMAIN: %w", err)
	}
	return int64(el) / n, nil
}

// Package supervise runs aokeyd's long-lived pieces (the key source's
// token renewal, the reconcile loop, the control API, the metrics
// listener, the reload and connect watchers) as one unit: they start in
// order, the first to fail stops the rest, and shutdown stops them in the
// reverse order, each waited for, within one deadline.
package supervise

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Runnable is one long-lived piece. Run blocks until ctx is cancelled (it
// then returns nil or ctx's error) or until it fails.
type Runnable struct {
	Name string
	Run  func(ctx context.Context) error
}

// ErrStopTimeout is wrapped by Run's error when a piece did not stop
// within the deadline.
var ErrStopTimeout = errors.New("did not stop in time")

type running struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned err
	err    error
}

// Run starts rs in order and waits until ctx is cancelled or one of them
// returns. Then it cancels them one by one in the reverse order, waiting
// for each, all within stopTimeout (counted from the first cancel). The
// error is the first piece's failure (a piece that returns before ctx is
// cancelled fails, even with a nil error), joined with the piece that did
// not stop in time (ErrStopTimeout; the pieces after it in the stop order
// are then cancelled together and not waited for); nil after a clean
// stop.
func Run(ctx context.Context, log *slog.Logger, stopTimeout time.Duration, rs ...Runnable) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	all := make([]*running, 0, len(rs))
	exited := make(chan *running, len(rs))
	for _, r := range rs {
		// Not derived from ctx: each piece is cancelled on its own, in
		// order, when the group stops.
		pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		one := &running{name: r.Name, cancel: cancel, done: make(chan struct{})}
		all = append(all, one)
		go func() {
			one.err = r.Run(pctx)
			close(one.done)
			exited <- one
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case one := <-exited:
		if ctx.Err() == nil {
			err := one.err
			if err == nil {
				err = errors.New("stopped on its own")
			}
			first = fmt.Errorf("%s: %w", one.name, err)
			log.Error("a long-lived piece failed; stopping the others", "piece", one.name, "err", err)
		}
	}
	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	errs := []error{first}
	for i := len(all) - 1; i >= 0; i-- {
		all[i].cancel()
		select {
		case <-all[i].done:
			if err := all[i].err; err != nil && !errors.Is(err, context.Canceled) && first == nil {
				errs = append(errs, fmt.Errorf("%s: %w", all[i].name, err))
			}
		case <-deadline.C:
			// Past the deadline: the pieces not stopped yet are cancelled
			// together and not waited for; the one that overran is named.
			for j := i - 1; j >= 0; j-- {
				all[j].cancel()
			}
			log.Error("a long-lived piece did not stop in time", "piece", all[i].name, "timeout", stopTimeout)
			errs = append(errs, fmt.Errorf("%s: %w", all[i].name, ErrStopTimeout))
			return errors.Join(errs...)
		}
	}
	return errors.Join(errs...)
}

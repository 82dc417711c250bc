package keystore

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// CacheOptions configure a Cache.
type CacheOptions struct {
	// Logger receives refresh results; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Bound reports whether a chain is in use (bound to a peer by the
	// policy): only bound chains are held at their last good version when
	// a read loses them (see Refresh). nil treats every chain as bound.
	// SetBound replaces it.
	Bound func(chain string) bool
}

// Cache holds the last good snapshot of a Source. A failed read (Vault down,
// sealed, 403, timeout, unreadable file) never replaces it: the last good
// snapshot stays in force, and Status exposes its age and the last error, so
// nothing downstream deletes a key because a source failed.
//
// A read that succeeds but loses something of a bound chain is merged with
// the last good snapshot per chain and per key: a chain that vanished, a
// chain left with no usable key and a key that is now rejected keep their
// last good version, recorded in Snapshot.Held (see merge). A chain or key
// leaves only when the source removes it in a valid way.
//
// The Cache owns the snapshots it holds and zeroes each one when it is
// replaced or when the Cache is closed; Current hands out clones that the
// caller owns and zeroes.
type Cache struct {
	src Source
	log *slog.Logger
	now func() time.Time

	mu        sync.Mutex
	good      *Snapshot
	goodAt    time.Time // last successful read (even if nothing changed)
	lastErr   error
	lastErrAt time.Time
	failures  int
	gen       uint64 // bumped each time good is replaced
	bound     func(chain string) bool
}

// NewCache returns an empty Cache over src.
func NewCache(src Source, o CacheOptions) *Cache {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Cache{src: src, log: o.Logger, now: o.Now, bound: o.Bound}
}

// SetBound replaces CacheOptions.Bound; the next read applies it.
func (c *Cache) SetBound(f func(chain string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bound = f
}

// Refresh reads the source once. changed reports whether the new snapshot
// differs from the held one in chains or chain versions (an unchanged source
// needs no re-apply). On error the held snapshot is kept and err is returned.
func (c *Cache) Refresh(ctx context.Context) (changed bool, err error) {
	s, err := c.src.Read(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err != nil {
		c.lastErr, c.lastErrAt = err, now
		c.failures++
		attrs := []any{"source", c.src.Name(), "err", err.Error(), "consecutive_failures", c.failures}
		if c.good != nil {
			attrs = append(attrs, "keeping_snapshot_age", now.Sub(c.goodAt).String())
		}
		c.log.Warn("key source read failed; keeping last good snapshot", attrs...)
		return false, err
	}
	c.failures = 0
	c.goodAt = now
	if c.good != nil && len(c.good.Held) == 0 && c.good.SameVersions(s) && len(s.Rejected()) == 0 {
		s.Zero()
		return false, nil
	}
	merge(c.good, s, c.bound)
	if c.good != nil && c.good.SameVersions(s) && sameHolds(c.good.Held, s.Held) {
		s.Zero()
		return false, nil
	}
	for _, r := range s.Rejected() {
		c.log.Warn("key rejected", "source", c.src.Name(), "err", r.Error())
	}
	for _, h := range s.Held {
		c.log.Warn("key source read lost keys: "+h.String(), "source", c.src.Name(), "chain", h.Chain, "key", h.Key,
			"reason", h.Reason.String(), "field", h.Field, "last_good_kept", h.LastGood)
	}
	c.log.Info("key source changed", "source", c.src.Name(), "chains", len(s.Chains))
	c.good.Zero()
	c.good = s
	c.gen++
	return true, nil
}

// Current returns a clone of the last good snapshot, owned by the caller
// (who zeroes it), or nil if no read has succeeded yet.
func (c *Cache) Current() *Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.good == nil {
		return nil
	}
	return c.good.Clone()
}

// Generation counts the snapshots the Cache has taken in: it changes
// exactly when Current would return a snapshot with other chains or chain
// versions, so a caller can skip work while it stays the same.
func (c *Cache) Generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// CacheStatus describes a Cache for status output and metrics.
type CacheStatus struct {
	Source string
	// HaveSnapshot is false until the first successful read.
	HaveSnapshot bool
	// LastGood is the time of the last successful read; Age is now minus
	// LastGood.
	LastGood time.Time
	Age      time.Duration
	// Versions are the chain versions of the held snapshot.
	Versions map[string]uint64
	// Rejected counts the MKTs of the held snapshot that failed validation.
	Rejected int
	// Held lists what the last read lost and the snapshot holds back (see
	// Hold).
	Held []Hold
	// LastError is the error of the most recent failed read (nil once a
	// read succeeds again), ConsecutiveFailures how many reads in a row
	// failed.
	LastError           error
	LastErrorAt         time.Time
	ConsecutiveFailures int
}

// Status reports the held snapshot's age and the last error.
func (c *Cache) Status() CacheStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := CacheStatus{Source: c.src.Name(), ConsecutiveFailures: c.failures, LastErrorAt: c.lastErrAt}
	if c.failures > 0 {
		st.LastError = c.lastErr
	}
	if c.good != nil {
		st.HaveSnapshot = true
		st.LastGood = c.goodAt
		st.Age = c.now().Sub(c.goodAt)
		st.Versions = c.good.Versions()
		st.Rejected = len(c.good.Rejected())
		st.Held = slices.Clone(c.good.Held)
	}
	return st
}

// DefaultRefresh is how often a key source is read unless configured
// otherwise (key_source.refresh): the one place it is written.
const DefaultRefresh = 30 * time.Second

// Run refreshes on every tick until ctx ends, once at the start, and calls
// onChange with a clone (owned by onChange) whenever the snapshot changed.
func (c *Cache) Run(ctx context.Context, tick <-chan time.Time, onChange func(*Snapshot)) {
	for {
		if changed, err := c.Refresh(ctx); err == nil && changed && onChange != nil {
			onChange(c.Current())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
	}
}

// Close zeroes the held snapshot.
func (c *Cache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.good.Zero()
	c.good = nil
}

package daemon

import (
	"sync"

	"github.com/aokeyd/aokeyd/keystore"
)

// snapshots hands out one read-only clone of the key cache's snapshot,
// with the recorded revocations applied, to every reader until the cache
// or the revocations change: a session coming up or an active open must
// not copy the whole key source (a route server with a key per peer holds
// thousands). The last reader of a replaced snapshot zeroes it.
type snapshots struct {
	mu  sync.Mutex
	cur *sharedSnap
}

type sharedSnap struct {
	snap  *keystore.Snapshot
	gen   uint64 // keystore.Cache generation
	rev   int    // recorded revocations
	refs  int
	stale bool // replaced: zero when refs drops to 0
}

// shared returns the current snapshot for reading only (nil when there is
// no good one yet) and the function that releases it. Callers must not
// modify the snapshot or zero it; one that needs to (Revoke) takes its own
// copy with snapshot.
func (co *core) shared() (*keystore.Snapshot, func()) {
	gen, rev := co.o.Keys.Generation(), co.revs.Count()
	co.snaps.mu.Lock()
	defer co.snaps.mu.Unlock()
	c := co.snaps.cur
	if c == nil || c.gen != gen || c.rev != rev {
		s := co.snapshot()
		if s == nil {
			return nil, func() {}
		}
		co.retire(c)
		c = &sharedSnap{snap: s, gen: gen, rev: rev}
		co.snaps.cur = c
	}
	c.refs++
	return c.snap, func() {
		co.snaps.mu.Lock()
		defer co.snaps.mu.Unlock()
		c.refs--
		if c.stale && c.refs == 0 {
			c.snap.Zero()
		}
	}
}

// retire marks c replaced (d.snaps.mu held), zeroing it now if no reader
// holds it.
func (co *core) retire(c *sharedSnap) {
	if c == nil {
		return
	}
	c.stale = true
	if c.refs == 0 {
		c.snap.Zero()
	}
}

// dropShared retires the current shared snapshot (Run's end).
func (co *core) dropShared() {
	co.snaps.mu.Lock()
	defer co.snaps.mu.Unlock()
	co.retire(co.snaps.cur)
	co.snaps.cur = nil
}

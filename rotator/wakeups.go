package rotator

import (
	"container/heap"
	"sync"
	"time"
)

// wakeups are a controller's waiting machines by when each is due, under
// one timer armed for the earliest. A timer per machine (time.AfterFunc,
// with its method value) was 128 bytes a peer, in a size class that timer
// churn left half empty: about 1 MiB of the daemon's heap at 4,096 peers.
// A due machine is woken as a producer wakes it (runner.poke: a run
// starts, or the one under way steps again), on a goroutine of its own,
// as its own timer's fired.
type wakeups struct {
	base time.Time // due times are nanoseconds from here (monotonic)

	mu    sync.Mutex // taken under a runner's mu, never the other way round
	q     wakeQueue
	timer *time.Timer // armed for q[0] (nil until the first wait)
	armed int64       // when the timer is armed for (noWake: not armed)
}

const noWake = -1

// newWakeups starts the clock of a controller's wake-ups.
func newWakeups() *wakeups { return &wakeups{base: time.Now(), armed: noWake} }

func (w *wakeups) now() int64 { return int64(time.Since(w.base)) }

// at has r woken d from now: once, replacing the wake-up it had.
func (w *wakeups) at(r *runner, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	r.due = now + int64(d)
	if r.wpos > 0 {
		heap.Fix(&w.q, int(r.wpos-1))
	} else {
		heap.Push(&w.q, r)
	}
	w.armLocked(now)
}

// cancel drops r's wake-up, if it has one.
func (w *wakeups) cancel(r *runner) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.wpos == 0 {
		return
	}
	heap.Remove(&w.q, int(r.wpos-1))
	if len(w.q) == 0 && w.timer != nil {
		w.timer.Stop() // an earlier root's firing would find nothing due
		w.armed = noWake
	}
}

// armLocked arms the timer for the earliest wake-up when it is not
// armed for it or earlier (w.mu held). A timer armed earlier than the
// root (its machine woken otherwise since) fires, finds nothing due and
// re-arms.
func (w *wakeups) armLocked(now int64) {
	if len(w.q) == 0 {
		return
	}
	due := w.q[0].due
	if w.armed != noWake && w.armed <= due {
		return
	}
	d := time.Duration(max(due-now, 0))
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.fire)
	} else {
		w.timer.Reset(d)
	}
	w.armed = due
}

// fire wakes every machine that is due and re-arms the timer for the
// next, on the timer's goroutine.
func (w *wakeups) fire() {
	w.mu.Lock()
	now := w.now()
	w.armed = noWake
	var due []*runner
	for len(w.q) > 0 && w.q[0].due <= now {
		due = append(due, heap.Pop(&w.q).(*runner))
	}
	w.armLocked(now)
	w.mu.Unlock()
	for _, r := range due {
		r.poke()
	}
}

// wakeQueue is a min-heap of runners by due; a runner's wpos is its index
// plus one (0: not in it).
type wakeQueue []*runner

func (q wakeQueue) Len() int           { return len(q) }
func (q wakeQueue) Less(i, j int) bool { return q[i].due < q[j].due }
func (q wakeQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].wpos, q[j].wpos = int32(i+1), int32(j+1)
}
func (q *wakeQueue) Push(x any) {
	r := x.(*runner)
	r.wpos = int32(len(*q) + 1)
	*q = append(*q, r)
}
func (q *wakeQueue) Pop() any {
	old := *q
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	r.wpos = 0
	return r
}

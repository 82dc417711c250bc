package supervise

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder notes the order pieces start and stop in.
type recorder struct {
	mu  sync.Mutex
	log []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.log = append(r.log, s); r.mu.Unlock() }
func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// piece runs until cancelled; stopping takes lag; fail, when set, makes it
// return that error after failAfter.
func piece(r *recorder, name string, lag time.Duration, failAfter time.Duration, fail error) Runnable {
	return Runnable{Name: name, Run: func(ctx context.Context) error {
		r.add("start " + name)
		var t <-chan time.Time
		if fail != nil {
			t = time.After(failAfter)
		}
		select {
		case <-ctx.Done():
			time.Sleep(lag)
			r.add("stop " + name)
			return nil
		case <-t:
			r.add("fail " + name)
			return fail
		}
	}}
}

func TestRun(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		pieces   func(r *recorder) []Runnable
		cancelAt time.Duration // 0: never
		want     []string
		wantErr  error
		wantTook time.Duration
	}{
		{
			name: "cancel stops in reverse order",
			pieces: func(r *recorder) []Runnable {
				return []Runnable{piece(r, "a", time.Second, 0, nil), piece(r, "b", time.Second, 0, nil), piece(r, "c", time.Second, 0, nil)}
			},
			cancelAt: time.Minute,
			want:     []string{"stop c", "stop b", "stop a"},
			wantTook: time.Minute + 3*time.Second,
		},
		{
			name: "a failure stops the others",
			pieces: func(r *recorder) []Runnable {
				return []Runnable{piece(r, "a", 0, 0, nil), piece(r, "b", 0, 5*time.Second, boom), piece(r, "c", 0, 0, nil)}
			},
			want:     []string{"fail b", "stop c", "stop a"},
			wantErr:  boom,
			wantTook: 5 * time.Second,
		},
		{
			name: "a piece that does not stop is given up at the deadline",
			pieces: func(r *recorder) []Runnable {
				return []Runnable{piece(r, "a", 0, 0, nil), piece(r, "slow", time.Hour, 0, nil), piece(r, "c", 0, 0, nil)}
			},
			cancelAt: time.Minute,
			want:     []string{"stop c", "stop a"},
			wantErr:  ErrStopTimeout,
			wantTook: time.Minute + 10*time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &recorder{}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancelAt > 0 {
					time.AfterFunc(tt.cancelAt, cancel)
				}
				start := time.Now()
				err := Run(ctx, nil, 10*time.Second, tt.pieces(r)...)
				took := time.Since(start)
				synctest.Wait() // pieces cancelled without waiting finish what they can
				if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("Run = %v, want %v", err, tt.wantErr)
				}
				if took != tt.wantTook {
					t.Errorf("Run took %v, want %v", took, tt.wantTook)
				}
				var got []string
				for _, l := range r.got() {
					if l[:5] != "start" {
						got = append(got, l)
					}
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("stops = %q, want %q", got, tt.want)
				}
				time.Sleep(2 * time.Hour) // let the slow piece end inside the bubble
			})
		})
	}
}

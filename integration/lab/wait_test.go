package lab

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

func TestPollWait(t *testing.T) {
	errBoom := errors.New("boom")
	cases := []struct {
		name      string
		doneAt    int // the look that reports done (0: never)
		failAt    int // the look that returns errBoom (0: never)
		cancelAt  int // cancel ctx at this look (0: never)
		wantLooks int
		wantTook  time.Duration
		check     func(*testing.T, error)
	}{
		{name: "done at once", doneAt: 1, wantLooks: 1, check: wantNil},
		{name: "done on the fourth look", doneAt: 4, wantLooks: 4, wantTook: 3 * time.Second, check: wantNil},
		{name: "an error ends the wait", failAt: 2, wantLooks: 2, wantTook: time.Second, check: func(t *testing.T, err error) {
			if !errors.Is(err, errBoom) || err.Error() != "waiting for the thing: boom" {
				t.Errorf("err = %v, want boom wrapped with what was awaited", err)
			}
		}},
		{name: "timeout keeps the last detail", wantLooks: 11, wantTook: 10 * time.Second, check: func(t *testing.T, err error) {
			var te *TimeoutError
			if !errors.As(err, &te) || te.What != "the thing" || te.After != 10*time.Second || te.Last != "look 11" {
				t.Fatalf("err = %#v, want a TimeoutError with the last look", err)
			}
			if err.Error() != "timed out after 10s waiting for the thing: look 11" {
				t.Errorf("message %q", err)
			}
		}},
		{name: "ctx ends the wait", cancelAt: 3, wantLooks: 3, wantTook: 2 * time.Second, check: func(t *testing.T, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				looks := 0
				start := time.Now()
				err := Poll{What: "the thing", Timeout: 10 * time.Second, Every: time.Second}.Wait(ctx, func() (bool, string, error) {
					looks++
					if looks == tc.cancelAt {
						cancel()
					}
					if looks == tc.failAt {
						return false, "", errBoom
					}
					return looks == tc.doneAt, "look " + strconv.Itoa(looks), nil
				})
				tc.check(t, err)
				if looks != tc.wantLooks {
					t.Errorf("%d looks, want %d", looks, tc.wantLooks)
				}
				if took := time.Since(start); took != tc.wantTook {
					t.Errorf("took %v, want %v", took, tc.wantTook)
				}
			})
		})
	}
}

func wantNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("err = %v, want nil", err)
	}
}

func TestPollDefaultEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		looks := 0
		err := Within(time.Second, "never", func() (bool, string) { looks++; return false, "" })
		var te *TimeoutError
		if !errors.As(err, &te) || te.Error() != "timed out after 1s waiting for never" {
			t.Fatalf("err = %v", err)
		}
		if want := int(time.Second/DefaultEvery) + 1; looks != want {
			t.Errorf("%d looks in 1s, want %d (every %v)", looks, want, DefaultEvery)
		}
	})
}

package daemon_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/tcpao"
)

// slowAddSocket is a listening socket whose TCP_AO_ADD_KEY takes delay
// once armed (a listener with thousands of keys, an optmem_max retry).
type slowAddSocket struct {
	tcpao.Socket
	armed *atomic.Bool
	delay time.Duration
}

func (s slowAddSocket) AddKey(k tcpao.Key, o tcpao.AddOptions) error {
	if s.armed.Load() {
		time.Sleep(s.delay)
	}
	return s.Socket.AddKey(k, o)
}

// A slow listener holds up no session: a key change's reconcile pass
// hands every session its desired state before it brings the listener in
// line, so the sessions install and announce the new key while the
// listener's writes are still under way (they took 30 s here; every
// session had the new key within a second).
func TestSlowListenerHoldsUpNoSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		f := newRevokeFleet(t, fleetOptions{n: 8, listener: func(s tcpao.Socket) tcpao.Socket {
			return slowAddSocket{Socket: s, armed: &armed, delay: 30 * time.Second}
		}})
		k3 := testKey{name: "k3", send: 40, recv: 41, secret: "slow-listener-secret-k3-Hy6", sendStart: time.Now()}
		keys := []keystore.MKT{f.k1.mkt(), f.k2.mkt(), k3.mkt()}
		armed.Store(true)
		f.src.setKeys(keys...)
		for i := range keys {
			keys[i].Zero()
		}
		start := time.Now()
		if err := f.d.RefreshKeys(context.Background()); err != nil {
			t.Fatal(err)
		}
		installed := func() int {
			n := 0
			for _, s := range f.socks {
				if slices.Contains(keyIDs(t, s), k3.ids()) {
					n++
				}
			}
			return n
		}
		for installed() < len(f.socks) && time.Since(start) < time.Minute {
			time.Sleep(10 * time.Millisecond)
		}
		if took := time.Since(start); installed() < len(f.socks) || took > time.Second {
			t.Errorf("%d of %d sessions had the new key %v after the key change, want all within 1s of it (the listener's writes take 30s)",
				installed(), len(f.socks), took.Round(time.Millisecond))
		}
		armed.Store(false)
	})
}

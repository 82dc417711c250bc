package daemon_test

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A neighbor with a TCP-MD5 password in the speaker (FRR's `neighbor ...
// password`, gobgpd's auth-password) is refused: the kernel rejects TCP-AO
// next to MD5 on one socket, so aokeyd leaves its session alone and says
// which neighbor and how to fix it.
func TestMD5NeighborRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k0, k1, _, _ := testKeys()
		e := newEnv(t, envOptions{keys: []testKey{k0, k1}})
		e.waitKeys("listener", e.lis, ids(k0, k1))
		e.connect(k0, k1)
		e.session = e.sessionInfo()
		e.session.MD5 = true
		e.sp.Set(e.session)
		// The policy stops wanting k0: a managed session would lose it.
		e.refreshWith(k1)
		e.waitKeys("listener", e.lis, ids(k1))
		e.quiet(5 * time.Second)
		if got := keyIDs(t, e.acc); !slices.Equal(got, ids(k0, k1)) {
			t.Fatalf("the MD5 neighbor's session keys %v, want them untouched (%v)", got, ids(k0, k1))
		}
		logs := e.logs.String()
		for _, want := range []string{"192.0.2.2", "no neighbor 192.0.2.2 password", "auth-password"} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log does not say %q:\n%s", want, logs)
			}
		}
		st := e.peerStatus()
		if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "no neighbor 192.0.2.2 password") }) {
			t.Errorf("status warnings %q do not name the fix", st.Warnings)
		}
	})
}

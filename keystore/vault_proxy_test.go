package keystore

import (
	"context"
	"testing"
	"time"

	"github.com/aokeyd/aokeyd/internal/vaultreal"
	"github.com/aokeyd/aokeyd/internal/vaultreal/faultproxy"
)

// TestVaultRealFaultProxy: the faults real Vault cannot be made to
// produce on demand, put between the source and a real dev Vault by a
// fault proxy (internal/vaultreal/faultproxy) on the chains' paths: a 500,
// an answer slower than the client's timeout, a connection cut before any
// answer. The expectations are those of the test server's fault tests
// (keepsSnapshot, as in TestVaultServerErrorKeepsLastGood): the source
// never strands the router (the last good snapshot stays), the status
// holds the failure and the log warns, nothing is echoed, and once the
// proxy passes again the new version is read. An answer slow but within
// the timeout is read.
func TestVaultRealFaultProxy(t *testing.T) {
	srv := vaultreal.StartDev(t)
	px := faultproxy.Start(t, srv.Addr)
	sec := loadSecrets(t)
	const timeout = time.Second
	for _, tc := range []struct {
		name    string
		fault   func()
		wantErr string // "": the read succeeds
	}{
		{"ServerError", func() { px.Fail("secret/", 500) }, "internal error"},
		{"SlowerThanTimeout", func() { px.Slow("secret/", 3*timeout) }, "gave no answer in time: read "},
		{"Cut", func() { px.Cut("secret/", true) }, "(connection cut before an answer): read "},
		{"SlowWithinTimeout", func() { px.Slow("secret/", timeout/4) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			px.Pass()
			e := realEnvs(px.URL(), srv.RootToken, "secret")(t)
			mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0])), 0)
			v := e.source(t, VaultAuth{Token: e.root}, func(o *VaultOptions) { o.Config.Timeout = timeout })
			log, count := newCounting(t)
			c := NewCache(v, CacheOptions{Logger: log})
			t.Cleanup(c.Close)
			if ch, err := c.Refresh(context.Background()); err != nil || !ch {
				t.Fatalf("first refresh: %t %v", ch, err)
			}
			mustWrite(t, e.rootSource(t), "core", chainJSON(t, []string{"192.0.2.2"}, key("k1", 1, 2, sec[0]), key("k2", 3, 4, sec[1])), 1)
			tc.fault()
			f0 := px.Faulted()
			if tc.wantErr == "" {
				start := time.Now()
				refreshes(t, c, "k2")
				if took := time.Since(start); took < timeout/4 {
					t.Errorf("the read took %v, less than the proxy's delay", took)
				}
			} else {
				keepsSnapshot(t, c, tc.wantErr)
				keepsSnapshot(t, c, tc.wantErr) // and again: nothing was half-read
				if st := c.Status(); st.ConsecutiveFailures != 2 || st.Versions["core"] != 1 {
					t.Errorf("status after two failed reads: %+v", st)
				}
				if n := count("key source read failed; keeping last good snapshot"); n != 2 {
					t.Errorf("%d warnings for two failed reads", n)
				}
				noToken(t, c.Status().LastError.Error(), e.root)
			}
			if px.Faulted() == f0 {
				t.Fatal("the proxy faulted no request: the fault was never met")
			}
			px.Pass()
			refreshes(t, c, "k2")
		})
	}
}

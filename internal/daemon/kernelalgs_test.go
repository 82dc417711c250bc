package daemon_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestStatusKernelAlgorithms: status shows which TCP-AO algorithms the
// kernel accepts, as probed at start, and warns of every key of an
// algorithm it refuses, naming the key, the field and the kernel; a kernel
// that accepts them all gets no such warning.
func TestStatusKernelAlgorithms(t *testing.T) {
	for _, refuse := range [][]tcpao.Algorithm{{}, {tcpao.HMACSHA256}} {
		synctest.Test(t, func(t *testing.T) {
			k1 := testKey{name: "k1", send: 1, recv: 101, secret: "kernel-algs-secret-1"}
			e := newEnv(t, envOptions{keys: []testKey{k1}, refuse: refuse})
			synctest.Wait()
			rep, err := e.d.Status(context.Background(), "")
			if err != nil {
				t.Fatal(err)
			}
			if rep.Kernel == nil || rep.Kernel.Release != "Linux 7.2.0-test" {
				t.Fatalf("status kernel %+v, want the probed one", rep.Kernel)
			}
			var refused []string
			for _, a := range refuse {
				refused = append(refused, string(a))
			}
			if !slices.Equal(rep.Kernel.Refused, refused) || len(rep.Kernel.Accepted)+len(refused) != len(tcpao.Algorithms) {
				t.Errorf("status kernel %+v, want refused %v", rep.Kernel, refused)
			}
			var warned []string
			for _, w := range rep.Warnings {
				if strings.Contains(w, "refuses it") {
					warned = append(warned, w)
				}
			}
			switch {
			case len(refuse) == 0 && len(warned) > 0:
				t.Errorf("warnings %q on a kernel that accepts every algorithm", warned)
			case len(refuse) > 0 && (len(warned) != 1 || !strings.Contains(warned[0], `key "k1"`) ||
				!strings.Contains(warned[0], "algorithm: ") || !strings.Contains(warned[0], "Linux 7.2.0-test")):
				t.Errorf("warnings %q, want one naming key k1, the field and the kernel", warned)
			}
		})
	}
}

package faultproxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Each mode against a plain backend that counts what reaches it: a
// request the mode matches gets the fault, one it does not match (or any
// in mode Pass) reaches the backend with its headers, and Faulted counts
// exactly the faulted ones.
func TestModes(t *testing.T) {
	var reached atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-Vault-Token"))
	}))
	t.Cleanup(backend.Close)
	p := Start(t, backend.URL)
	client := &http.Client{Timeout: 500 * time.Millisecond}
	get := func(path string) (int, string, time.Duration, error) {
		req, _ := http.NewRequest("LIST", p.URL()+path, nil)
		req.Header.Set("X-Vault-Token", "tok")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", time.Since(start), err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start), err
	}
	for _, tc := range []struct {
		name    string
		set     func()
		path    string
		status  int    // 0: the request fails
		body    string // in the answer
		errText string // in the error, when it fails
		faulted bool
		atLeast time.Duration
	}{
		{"Pass", p.Pass, "/v1/secret/data/a", 200, "LIST /v1/secret/data/a tok", "", false, 0},
		{"FailMatching", func() { p.Fail("secret/", 500) }, "/v1/secret/data/a", 500, "internal error", "", true, 0},
		{"FailOtherPath", func() { p.Fail("secret/", 500) }, "/v1/auth/approle/login", 200, "LIST /v1/auth/approle/login tok", "", false, 0},
		{"SlowWithinTimeout", func() { p.Slow("secret/", 200*time.Millisecond) }, "/v1/secret/data/a", 200, "LIST /v1/secret/data/a tok", "", true, 200 * time.Millisecond},
		{"SlowPastTimeout", func() { p.Slow("", 2*time.Second) }, "/v1/sys/health", 0, "", "Client.Timeout exceeded", true, 500 * time.Millisecond},
		{"Cut", func() { p.Cut("secret/", true) }, "/v1/secret/metadata/a", 0, "", "EOF", true, 0},
		{"SlowThenFail", func() { p.Slow("secret/", 200*time.Millisecond); p.Fail("secret/data/", 503) }, "/v1/secret/data/a", 503, "internal error", "", true, 200 * time.Millisecond},
		{"CutWinsOverFail", func() { p.Fail("secret/", 500); p.Cut("secret/data/", true) }, "/v1/secret/data/a", 0, "", "EOF", true, 0},
		{"Removed", func() {
			p.Fail("secret/", 500)
			p.Cut("secret/", true)
			p.Slow("secret/", time.Second)
			p.Fail("secret/", 0)
			p.Cut("secret/", false)
			p.Slow("secret/", 0)
		},
			"/v1/secret/data/a", 200, "LIST /v1/secret/data/a tok", "", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.Pass()
			tc.set()
			r0, f0 := reached.Load(), p.Faulted()
			status, body, took, err := get(tc.path)
			switch {
			case tc.status == 0 && (err == nil || !strings.Contains(err.Error(), tc.errText)):
				t.Errorf("%d %q %v; want an error with %q", status, body, err, tc.errText)
			case tc.status != 0 && (err != nil || status != tc.status || !strings.Contains(body, tc.body)):
				t.Errorf("%d %q %v; want %d with %q", status, body, err, tc.status, tc.body)
			}
			if took < tc.atLeast {
				t.Errorf("answered in %v, want at least %v", took, tc.atLeast)
			}
			wantReached := tc.status == 200
			if got := reached.Load() > r0; got != wantReached {
				t.Errorf("reached the backend %t, want %t", got, wantReached)
			}
			wantF := 0
			if tc.faulted {
				wantF = 1
			}
			if got := p.Faulted() - f0; got != wantF {
				t.Errorf("Faulted moved by %d, want %d", got, wantF)
			}
		})
	}
	var ue interface{ Timeout() bool }
	p.Pass()
	p.Slow("", time.Second)
	if _, _, _, err := get("/v1/x"); !errors.As(err, &ue) || !ue.Timeout() {
		t.Errorf("a slow answer past the client's timeout: %v, want a timeout", err)
	}
}

func TestNewRefusesABadTarget(t *testing.T) {
	for _, target := range []string{"", "127.0.0.1:8200", "http://"} {
		if p, err := New(target); err == nil {
			p.Close()
			t.Errorf("New(%q) started a proxy", target)
		}
	}
}

// Package faultproxy is an HTTP reverse proxy for tests that puts between
// a client and a real Vault (internal/vaultreal) the faults Vault cannot
// be made to produce on demand: slow answers, 500s, a connection cut
// before any answer. Its faults are switched at run time, per path
// prefix, as keystore/vaulttest's Delay and Fail are; it starts passing
// every request through unchanged.
//
// Invariants: a request no fault matches (its path, without "/v1/", starts
// with no fault's prefix) is passed through as it came; of the faults that
// match, a cut wins over a failure, and a failure over a delay, which
// holds the request first in every case; the proxy never logs or answers
// a header or a body of a request (tokens, key material), and its own
// answers (the failures) hold nothing of the request. Faulted counts the
// requests it faulted, so a test can show that its fault was met, not
// passed by.
package faultproxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Proxy is a running fault proxy.
type Proxy struct {
	srv *httptest.Server
	rp  *httputil.ReverseProxy

	mu      sync.Mutex
	delays  map[string]time.Duration // prefix -> delay
	fails   map[string]int           // prefix -> HTTP status
	cuts    map[string]bool          // prefixes
	faulted int
}

// New starts a proxy on 127.0.0.1 in front of target (e.g.
// http://127.0.0.1:8200), with no fault. Close stops it.
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q: want scheme://host:port", target)
	}
	p := &Proxy{rp: httputil.NewSingleHostReverseProxy(u),
		delays: map[string]time.Duration{}, fails: map[string]int{}, cuts: map[string]bool{}}
	// The server's errors (a refused connection while Vault is stopped)
	// are a 502 to the client, as a load balancer answers; nothing logged.
	p.rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	p.srv = httptest.NewServer(p)
	return p, nil
}

// Start is New for a test: t fails if the proxy cannot start, and the
// proxy is closed when t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's address, for the client's VAULT_ADDR.
func (p *Proxy) URL() string { return p.srv.URL }

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// Pass removes every fault: each request goes through from now on.
func (p *Proxy) Pass() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.delays)
	clear(p.fails)
	clear(p.cuts)
}

// Slow holds each request whose path starts with prefix for d before the
// rest (0 removes it). The client may give up first: its request is then
// dropped, never passed on.
func (p *Proxy) Slow(prefix string, d time.Duration) { setFault(p, p.delays, prefix, max(d, 0)) }

// Fail answers each request whose path starts with prefix with status and
// Vault's error shape, {"errors":["... internal error ..."]}, without
// passing it on (0 removes it): as a Vault whose storage errs.
func (p *Proxy) Fail(prefix string, status int) { setFault(p, p.fails, prefix, status) }

// Cut closes the connection of each request whose path starts with
// prefix before any answer (on false removes it): as a Vault that dies
// mid-request, or a middlebox that drops the connection.
func (p *Proxy) Cut(prefix string, on bool) { setFault(p, p.cuts, prefix, on) }

// setFault sets m[prefix] to v under p's lock, or removes it when v is
// the zero value (no fault). m is one of p's maps, made once by New.
func setFault[V comparable](p *Proxy, m map[string]V, prefix string, v V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var none V
	if v == none {
		delete(m, prefix)
	} else {
		m[prefix] = v
	}
}

// Faulted is how many requests the proxy has faulted so far.
func (p *Proxy) Faulted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faulted
}

// ServeHTTP applies the faults that match r.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path, _ := strings.CutPrefix(r.URL.Path, "/v1/")
	var delay time.Duration
	status, cut := 0, false
	p.mu.Lock()
	for pre, d := range p.delays {
		if strings.HasPrefix(path, pre) {
			delay = max(delay, d)
		}
	}
	for pre, st := range p.fails {
		if strings.HasPrefix(path, pre) {
			status = st
		}
	}
	for pre := range p.cuts {
		cut = cut || strings.HasPrefix(path, pre)
	}
	if delay > 0 || status != 0 || cut {
		p.faulted++
	}
	p.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return // the client gave up
		}
	}
	switch {
	case cut:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				_ = c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // no hijack: the server drops the connection
	case status != 0:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, "{\"errors\":[\"1 error occurred:\\n\\t* internal error (faultproxy: %d)\\n\\n\"]}\n", status)
		return
	}
	p.rp.ServeHTTP(w, r)
}

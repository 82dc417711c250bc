package vaulttest

import (
	"context"
	"testing"

	"github.com/hashicorp/vault/api"
)

// Holding starts a test server whose KV v2 mount "secret" holds data at
// path (a chain under aokeyd/chains/, say), written with the root token
// as an operator's automation would; the server closes when t ends.
func Holding(t testing.TB, path string, data map[string]any) *Server {
	t.Helper()
	srv, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := api.NewClient(&api.Config{Address: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(srv.RootToken())
	if _, err := c.KVv2("secret").Put(context.Background(), path, data); err != nil {
		t.Fatalf("vaulttest: writing %s: %v", path, err)
	}
	return srv
}

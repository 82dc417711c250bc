package vaulttest

import (
	"net/http"

	"github.com/hashicorp/vault/api"
)

// ClientConfig is a Vault API client configuration that reaches this
// InMemory server: its URL, connections through DialContext, and no
// retries (a test sees the server's first answer).
func (s *Server) ClientConfig() *api.Config {
	cfg := api.DefaultConfig()
	cfg.Address = s.URL()
	cfg.MaxRetries = 0
	cfg.HttpClient.Transport.(*http.Transport).DialContext = s.DialContext
	return cfg
}

package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/aokeyd/aokeyd/keystore"
)

// Revocation is one recorded emergency revoke.
type Revocation struct {
	Chain string    `json:"chain"`
	Key   string    `json:"key"`
	At    time.Time `json:"at"`
}

// revokeStore persists revocations (names only, never key material) so a
// restarted daemon does not re-install a revoked key even when the key
// source could not be told, or has not caught up.
type revokeStore struct {
	path string
	mu   sync.Mutex
	list []Revocation
}

func openRevokeStore(path string) (*revokeStore, error) {
	s := &revokeStore{path: path}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("revocations %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &s.list); err != nil {
		return nil, fmt.Errorf("revocations %s: %w", path, err)
	}
	return s, nil
}

func (s *revokeStore) add(r Revocation) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.ContainsFunc(s.list, func(x Revocation) bool { return x.Chain == r.Chain && x.Key == r.Key }) {
		s.list = append(s.list, r)
	}
	if s.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(s.list, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.path)
}

// count is the number of recorded revocations (it only grows).
func (s *revokeStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.list)
}

// apply marks the recorded revocations in snap (a snapshot the caller owns).
func (s *revokeStore) apply(snap *keystore.Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.list {
		c := snap.Chains[r.Chain]
		if c == nil {
			continue
		}
		for i := range c.Keys {
			if c.Keys[i].Name == r.Key {
				c.Keys[i].Revoked = true
			}
		}
	}
}

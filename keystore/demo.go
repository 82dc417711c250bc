package keystore

import (
	"errors"
	"sync"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ErrDemoKey: a key's material is one of the demo keys `aokeyd init`
// writes (DefaultKeyFile), whose secrets are published in aokeyd's source.
var ErrDemoKey = errors.New("PUBLIC DEMO KEY: this key's secret is one of the demo keys `aokeyd init` writes, published in aokeyd's source: anyone can sign this session's segments; replace it before it protects a real session (head -c 20 /dev/urandom | base64, and the same secret on the peer; see docs/keys.md)")

// demoFingerprints are the fingerprints of the demo key file's secrets,
// decoded once; the decoded secrets are zeroed.
var demoFingerprints = sync.OnceValue(func() map[tcpao.Fingerprint]bool {
	fps := map[tcpao.Fingerprint]bool{}
	s, err := DecodeFile("default-keys.yaml", DefaultKeyFile())
	if err != nil {
		panic("keystore: the embedded demo key file does not decode: " + err.Error())
	}
	defer s.Zero()
	for _, c := range s.Chains {
		for _, m := range c.Keys {
			fps[m.Secret.Fingerprint()] = true
		}
		if c.MD5 != nil {
			fps[c.MD5.Secret.Fingerprint()] = true
		}
	}
	return fps
})

// DemoKeys returns a warning (a *FieldError wrapping ErrDemoKey) for each
// key and TCP-MD5 password of s whose material is a demo key's, found by
// its fingerprint, whatever its chain or name: a demo key renamed is
// still public. Revoked keys are left out.
func (s *Snapshot) DemoKeys() []error {
	if s == nil {
		return nil
	}
	demo := demoFingerprints()
	var out []error
	for _, n := range s.ChainNames() {
		c := s.Chains[n]
		for _, m := range c.Keys {
			if !m.Revoked && demo[m.Secret.Fingerprint()] {
				out = append(out, &FieldError{Pos: m.At, Field: m.Path, Chain: c.Name, Key: m.Name, Err: ErrDemoKey})
			}
		}
		if p := c.MD5; p != nil && !p.Revoked && demo[p.Secret.Fingerprint()] {
			out = append(out, &FieldError{Pos: p.At, Field: p.Path, Chain: c.Name, Err: ErrDemoKey})
		}
	}
	return out
}

package rotator

import "testing"

// knownCounts is a socket's fingerprinted reads and those of them that
// named the secrets they expect (KeyFilter.Known).
func (s *testSock) knownCounts() (fp, known int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fpReads, s.knownReads
}

// TestFullReadsNameTheDesiredSecrets: every read that fingerprints keys
// names the desired keys' secrets (tcpao.Known), so that a key holding
// one is not hashed again: a machine's reads through a whole roll at
// both ends, the accepted socket's clean, and the listener's sync. Each
// read in full of a fleet-wide roll hashed every key it returned.
func TestFullReadsNameTheDesiredSecrets(t *testing.T) {
	a, b := mkKey(peerA, 1, 1, "alpha"), mkKey(peerA, 2, 2, "bravo")
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) []*testSock
	}{
		{"a roll, both ends", func(t *testing.T) []*testSock {
			l := newLink(t, a, want(a), want(a), nil)
			l.mx.setDesired(want(b), l.now)
			l.my.setDesired(farDesired(want(b)), l.now)
			for i := 0; l.mx.st.Rolls == 0 || l.my.st.Rolls == 0; i++ {
				if i > 2000 {
					t.Fatalf("the roll did not complete: x=%+v y=%+v", l.mx.st, l.my.st)
				}
				l.tick()
			}
			return []*testSock{l.x, l.y}
		}},
		{"an accepted socket's clean", func(t *testing.T) []*testSock {
			s := newEstablished(a)
			d := want(a)
			d.Keys = append(d.Keys, dk(b))
			if _, err := Clean(s, d); err != nil {
				t.Fatal(err)
			}
			return []*testSock{s}
		}},
		{"a listener's sync", func(t *testing.T) []*testSock {
			lis := newListener()
			d := Desired{Socket: "lis", Keys: []DesiredKey{dk(a), dk(b)}}
			for range 2 { // installs, then finds them
				if _, err := SyncListener(lis, d, ListenerOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			return []*testSock{lis}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, s := range tc.run(t) {
				fp, known := s.knownCounts()
				if fp == 0 || known != fp {
					t.Errorf("socket %d: %d of %d fingerprinted reads named the desired secrets, want all (and some)", i, known, fp)
				}
			}
		})
	}
}

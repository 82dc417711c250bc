package tcpao_test

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// roleSock is a listener whose Info reports Current_key (the kernel bug's
// leftover of a key set before listen()) or not, and counts the reads.
type roleSock struct {
	info  tcpao.Info
	keys  []tcpao.KeyInfo
	infos int
	dels  []tcpao.DelKey
}

func (s *roleSock) AddKey(tcpao.Key, tcpao.AddOptions) error { return nil }
func (s *roleSock) SetInfo(tcpao.InfoChange) error           { return nil }
func (s *roleSock) Info() (tcpao.Info, error)                { s.infos++; return s.info, nil }
func (s *roleSock) Keys(tcpao.KeyFilter) ([]tcpao.KeyInfo, error) {
	return s.keys, nil
}
func (s *roleSock) DelKey(d tcpao.DelKey) error {
	s.dels = append(s.dels, d)
	for _, k := range s.keys {
		if k.IsCurrent && k.KeyRef == d.KeyRef && !d.Async {
			return syscall.EBUSY
		}
	}
	return nil
}

func ref(peer string, id uint8) tcpao.KeyRef {
	return tcpao.KeyRef{Peer: netip.MustParsePrefix(peer), SendID: id, RecvID: id}
}

// TestDeleterReadsRolesOnce: a run of async deletes through one Deleter
// reads TCP_AO_INFO once while the listener has neither Current_key nor
// RNext_key, and checks every delete while it has one (the in-use key
// deleted synchronously and refused, the others still async); DeleteKey
// alone checks each. With NoAsync (a kernel with a del_async defect) no
// delete is async and none needs the check, and the in-use key is still
// refused with ErrListenerKeyInUse.
func TestDeleterReadsRolesOnce(t *testing.T) {
	a, b, c := ref("10.0.0.1/32", 1), ref("10.0.0.2/32", 2), ref("10.0.0.3/32", 3)
	stale := []tcpao.KeyInfo{{KeyRef: a, IsCurrent: true}}
	for _, tc := range []struct {
		name      string
		info      tcpao.Info
		keys      []tcpao.KeyInfo
		one       bool // one Deleter for the run, else DeleteKey each
		noAsync   bool // Deleter.NoAsync (with one)
		wantInfos int
		wantAsync []bool
		wantErr   []error
	}{
		{"no roles, one Deleter", tcpao.Info{}, nil, true, false, 1, []bool{true, true, true}, []error{nil, nil, nil}},
		{"no roles, DeleteKey each", tcpao.Info{}, nil, false, false, 3, []bool{true, true, true}, []error{nil, nil, nil}},
		{"stale Current_key, one Deleter", tcpao.Info{HaveCurrent: true, CurrentKey: 1}, stale, true, false, 3,
			[]bool{true, false, true}, []error{nil, tcpao.ErrListenerKeyInUse, nil}},
		{"no roles, NoAsync", tcpao.Info{}, nil, true, true, 0, []bool{false, false, false}, []error{nil, nil, nil}},
		{"stale Current_key, NoAsync", tcpao.Info{HaveCurrent: true, CurrentKey: 1}, stale, true, true, 0,
			[]bool{false, false, false}, []error{nil, tcpao.ErrListenerKeyInUse, nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &roleSock{info: tc.info, keys: tc.keys}
			dl := tcpao.Deleter{S: s, NoAsync: tc.noAsync}
			for i, r := range []tcpao.KeyRef{b, a, c} {
				var err error
				if tc.one {
					err = dl.Delete(tcpao.DelKey{KeyRef: r, Async: true})
				} else {
					err = tcpao.DeleteKey(s, tcpao.DelKey{KeyRef: r, Async: true})
				}
				if !errors.Is(err, tc.wantErr[i]) || (err != nil) != (tc.wantErr[i] != nil) {
					t.Errorf("delete %d (%v): err %v, want %v", i, r, err, tc.wantErr[i])
				}
			}
			if s.infos != tc.wantInfos {
				t.Errorf("TCP_AO_INFO read %d times, want %d", s.infos, tc.wantInfos)
			}
			if len(s.dels) != len(tc.wantAsync) {
				t.Fatalf("%d deletes reached the socket, want %d", len(s.dels), len(tc.wantAsync))
			}
			for i, d := range s.dels {
				if d.Async != tc.wantAsync[i] {
					t.Errorf("delete %d async=%v, want %v", i, d.Async, tc.wantAsync[i])
				}
			}
		})
	}
}

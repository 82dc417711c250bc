package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/aokeyd/aokeyd/bgp/peer"
	"github.com/aokeyd/aokeyd/internal/durable"
)

// Store holds the migrations, one per peer (its peer.Key), kept in a
// file (JSON, 0600, written durably at each change) so that a restarted
// aokeyd goes on where it was. It is safe for concurrent use.
type Store struct {
	mu    sync.Mutex
	path  string // "": in memory only
	fault durable.Fault
	recs  []Record
	// restored says why Open took the backup ("": it did not).
	restored string
	gen      uint64
}

// maxBytes caps the record read at start: a record is about 200 bytes a
// peer, so this is over 80,000 peers.
const maxBytes = 16 << 20

type file struct {
	Migrations []Record `json:"migrations"`
}

func parse(b []byte) (file, error) {
	var f file
	err := json.Unmarshal(b, &f)
	return f, err
}

// record is the store's file in the shared record layer
// (durable.Record): read as a regular file only, capped, kept with a
// backup at path.bak that restores it when it is found unreadable.
func record(path string, fault durable.Fault) durable.Record {
	return durable.Record{Path: path, Max: maxBytes, Fault: fault, Check: func(b []byte) error {
		_, err := parse(b)
		return err
	}}
}

// Open loads the store at path ("": in memory only); a missing file (and
// backup) is an empty store.
func Open(path string) (*Store, error) { return OpenWith(path, nil) }

// OpenWith is Open with every write of the record asking fault (when set)
// before each step (tests: durable.Fault).
func OpenWith(path string, fault durable.Fault) (*Store, error) {
	s := &Store{path: path, fault: fault}
	if path == "" {
		return s, nil
	}
	b, err := record(path, fault).Load()
	if err != nil {
		return nil, fmt.Errorf("migrations record %w", err)
	}
	if b.From == durable.None {
		return s, nil
	}
	f, err := parse(b.Data) // Load checked it
	if err != nil {
		return nil, fmt.Errorf("migrations record %s: %w", path, err)
	}
	for _, r := range f.Migrations {
		if !r.Peer.IsValid() || !r.Prefix.IsValid() || !r.Prefix.Contains(r.Peer.Addr) {
			return nil, fmt.Errorf("migrations record %s: peer %s: prefix %s does not cover it", path, r.Peer, r.Prefix)
		}
	}
	s.recs = f.Migrations
	if b.From == durable.Backup {
		s.restored = "is missing"
		if b.SetAside != "" {
			s.restored = "is unreadable (" + b.PrimaryErr.Error() + "; kept as " + b.SetAside + ")"
		}
	}
	return s, nil
}

// Restored says, when Open found the record missing or unreadable and
// restored it from its backup, why ("" otherwise): the caller logs it.
func (s *Store) Restored() string { return s.restored }

// Generation changes with every change of the store.
func (s *Store) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// All returns the records, in peer order.
func (s *Store) All() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recs)
}

// Get returns the peer's record.
func (s *Store) Get(id peer.Key) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.find(id)
	if i < 0 {
		return Record{}, false
	}
	return s.recs[i], true
}

func (s *Store) find(id peer.Key) int {
	return slices.IndexFunc(s.recs, func(r Record) bool { return r.Peer == id })
}

// Put stores r (replacing the peer's record) and writes the file. The
// record in memory changes even when the write fails: the error says the
// change may not survive a restart.
func (s *Store) Put(r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.find(r.Peer); i >= 0 {
		if s.recs[i] == r {
			return nil
		}
		s.recs[i] = r
	} else {
		s.recs = append(s.recs, r)
		slices.SortFunc(s.recs, func(a, b Record) int { return a.Peer.Compare(b.Peer) })
	}
	s.gen++
	return s.writeLocked()
}

func (s *Store) writeLocked() error {
	if s.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(file{s.recs}, "", "  ")
	if err != nil {
		return err
	}
	return record(s.path, s.fault).Save(append(b, '\n'))
}

package rotator

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ReadMode says what a read of a socket returns.
type ReadMode uint8

const (
	// ReadFull reads every key with its fingerprint (an HMAC of its
	// secret): what PlanSocket plans from.
	ReadFull ReadMode = iota
	// ReadBare leaves the fingerprints out, which cost more than the read
	// itself in an emulated guest: IDs, flags, settings and counters, for
	// a reader that plans nothing from them (status, counters, a roll
	// waiting for the peer's switch). The result is marked Bare and
	// PlanSocket plans nothing from it.
	ReadBare
)

// Observe reads a socket's TCP-AO state with TCP_AO_INFO and
// TCP_AO_GET_KEYS. A socket without TCP-AO (ENOENT) is reported with
// HaveAO false and no error. A socket that offers BatchKeys is read in one
// borrow of its descriptor (on bgp's sockets, one pidfd_getfd for both).
func Observe(s tcpao.Socket, mode ReadMode) (Observed, error) { return observeKnown(s, mode, nil) }

// observeKnown is Observe with the secrets the reader expects (readIn).
func observeKnown(s tcpao.Socket, mode ReadMode, known *tcpao.Known) (Observed, error) {
	var o Observed
	err := tcpao.Batch(s, func(bs tcpao.Socket) error {
		var err error
		o, err = readIn(bs, mode, known)
		return err
	})
	return o, err
}

// knownOf is d's keys' secrets, for the reads of a socket d is desired
// for (tcpao.Known): a key read that holds one of them is fingerprinted
// without an HMAC. A nil d knows none.
func knownOf(d *Desired) *tcpao.Known {
	if d == nil {
		return nil
	}
	ks := make([]tcpao.KnownKey, len(d.Keys))
	for i := range d.Keys {
		k := &d.Keys[i].Key
		ks[i] = tcpao.KnownKey{SendID: k.SendID, RecvID: k.RecvID, Secret: k.Secret}
	}
	return tcpao.NewKnown(ks)
}

// writeRead runs write on s and reads s back, in one borrow of its
// descriptor when s offers BatchKeys: the one way a write is followed by
// its read-back. err is write's (or the borrow's), and then nothing was
// read; readErr is the read's.
func writeRead(s tcpao.Socket, mode ReadMode, known *tcpao.Known, write func(tcpao.Socket) error) (obs Observed, readErr, err error) {
	err = tcpao.Batch(s, func(bs tcpao.Socket) error {
		if err := write(bs); err != nil {
			return err
		}
		obs, readErr = readIn(bs, mode, known)
		return nil
	})
	return obs, readErr, err
}

// readIn reads bs, a socket already borrowed (or one that needs no borrow).
// known are the secrets the reader expects (nil: none): a full read
// fingerprints a key holding one of them without an HMAC, with the same
// result (tcpao.Known).
func readIn(s tcpao.Socket, mode ReadMode, known *tcpao.Known) (Observed, error) {
	info, err := s.Info()
	if errors.Is(err, syscall.ENOENT) {
		return Observed{}, nil
	}
	if err != nil {
		return Observed{}, fmt.Errorf("observe: TCP_AO_INFO: %w", err)
	}
	bare := mode == ReadBare
	f := tcpao.KeyFilter{SkipFingerprint: bare}
	if !bare {
		f.Known = known
	}
	keys, err := s.Keys(f)
	if err != nil {
		return Observed{}, fmt.Errorf("observe: TCP_AO_GET_KEYS: %w", err)
	}
	return Observed{HaveAO: true, Info: info, Keys: keys, Bare: bare}, nil
}

// read reads the machine's socket in a borrow of its own and records its
// counters in the status.
func (m *machine) read(now time.Time, mode ReadMode) (Observed, error) {
	obs, err := observeKnown(m.sock, mode, m.knownKeys(mode))
	if err == nil {
		m.st.Counters = CountersOf(obs, now)
	}
	return obs, err
}

// writeRead runs write on the machine's socket and reads it back, in one
// borrow, into obs and the status's counters; then, when not nil, runs
// in the same borrow after a read-back that succeeded (the install's
// announce, which its read-back decides). read reports whether the
// read-back succeeded; when it did not, obs is left as it was. err is
// write's, or the borrow's.
func (m *machine) writeRead(now time.Time, mode ReadMode, obs *Observed, write func(tcpao.Socket) error, then func(tcpao.Socket)) (read bool, err error) {
	err = tcpao.Batch(m.sock, func(bs tcpao.Socket) error {
		if err := write(bs); err != nil {
			return err
		}
		o2, err := readIn(bs, mode, m.knownKeys(mode))
		if err != nil {
			return nil
		}
		m.st.Counters = CountersOf(o2, now)
		*obs, read = o2, true
		if then != nil {
			then(bs)
		}
		return nil
	})
	return read, err
}

// knownKeys is the machine's desired keys' secrets, for a read in mode
// (nil for a bare one, which fingerprints nothing): made once per
// desired state within a run (takeDesired drops them), and dropped at
// the run's end (handOff), so that a machine that waits holds none.
func (m *machine) knownKeys(mode ReadMode) *tcpao.Known {
	if mode == ReadBare {
		return nil
	}
	if m.known == nil {
		m.known = knownOf(m.desired)
	}
	return m.known
}

// Apply runs ops in order on s and stops at the first error. It returns how
// many ops succeeded; the error names the op that failed. A socket that
// offers BatchKeys runs them all in one borrow of the descriptor, as a bare
// setsockopt loop would.
func Apply(s tcpao.Socket, ops []Op) (int, error) { return apply(s, ops, false) }

// apply is Apply; noAsync runs the deletes that ask for del_async
// synchronously (tcpao.Deleter.NoAsync).
func apply(s tcpao.Socket, ops []Op, noAsync bool) (int, error) {
	if len(ops) <= 1 {
		return applyOps(s, ops, noAsync)
	}
	var n int
	err := tcpao.Batch(s, func(bs tcpao.Socket) error {
		var err error
		n, err = applyOps(bs, ops, noAsync)
		return err
	})
	return n, err
}

// applyOps runs ops in order; its deletes share one tcpao.Deleter, so a
// listener's batch reads TCP_AO_INFO once for all its del_async, not once
// each (16,384 reads in a rotation of 16,384 peers).
func applyOps(s tcpao.Socket, ops []Op, noAsync bool) (int, error) {
	del := tcpao.Deleter{S: s, NoAsync: noAsync}
	for i := range ops {
		if err := applyOp(s, &del, &ops[i]); err != nil {
			return i, fmt.Errorf("op %d (%s): %w", i+1, ops[i].Line(), err)
		}
	}
	return len(ops), nil
}

func applyOp(s tcpao.Socket, del *tcpao.Deleter, op *Op) error {
	switch op.Kind {
	case OpAdd:
		return s.AddKey(op.Key, op.Add)
	case OpDel:
		return del.Delete(op.Del)
	case OpSetInfo:
		return s.SetInfo(op.infoChange())
	}
	return fmt.Errorf("unknown op kind %d", op.Kind)
}

func (o *Op) infoChange() tcpao.InfoChange {
	var c tcpao.InfoChange
	if o.Current.Valid {
		v := o.Current.ID
		c.Current = &v
	}
	if o.RNext.Valid {
		v := o.RNext.ID
		c.RNext = &v
	}
	if o.SetRequired {
		v := o.AORequired
		c.AORequired = &v
	}
	return c
}

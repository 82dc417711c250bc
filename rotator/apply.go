package rotator

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Observe reads a socket's TCP-AO state with TCP_AO_INFO and
// TCP_AO_GET_KEYS. A socket without TCP-AO (ENOENT) is reported with
// HaveAO false and no error. A socket that offers BatchKeys is read in one
// borrow of its descriptor (on bgp's sockets, one pidfd_getfd for both).
func Observe(s tcpao.Socket) (Observed, error) { return observeAs(s, false) }

// ObserveBare is Observe without the keys' fingerprints (an HMAC of each
// key's secret, which costs more than the read in an emulated guest): IDs,
// flags, settings and counters for a reader that plans nothing from them
// (status, counters, a roll waiting for the peer's switch). The result is
// marked Bare, and PlanSocket plans nothing from it.
func ObserveBare(s tcpao.Socket) (Observed, error) { return observeAs(s, true) }

func observeAs(s tcpao.Socket, bare bool) (Observed, error) {
	var o Observed
	err := tcpao.Batch(s, func(bs tcpao.Socket) error {
		var err error
		o, err = observeWith(bs, bare)
		return err
	})
	return o, err
}

func observeWith(s tcpao.Socket, bare bool) (Observed, error) {
	info, err := s.Info()
	if errors.Is(err, syscall.ENOENT) {
		return Observed{}, nil
	}
	if err != nil {
		return Observed{}, fmt.Errorf("observe: TCP_AO_INFO: %w", err)
	}
	keys, err := s.Keys(tcpao.KeyFilter{SkipFingerprint: bare})
	if err != nil {
		return Observed{}, fmt.Errorf("observe: TCP_AO_GET_KEYS: %w", err)
	}
	return Observed{HaveAO: true, Info: info, Keys: keys, Bare: bare}, nil
}

// writeRead runs write on s and reads s back (Observe), in one borrow of
// its descriptor when s offers BatchKeys: a roll step reads the socket
// after each of its writes. err is write's (or the borrow's), and then
// nothing was read; readErr is the read's.
func writeRead(s tcpao.Socket, write func(tcpao.Socket) error) (obs Observed, readErr, err error) {
	err = tcpao.Batch(s, func(bs tcpao.Socket) error {
		if err := write(bs); err != nil {
			return err
		}
		obs, readErr = observeWith(bs, false)
		return nil
	})
	return obs, readErr, err
}

// guardedRead is guarded for a step that writes to the socket and then
// reads it back: both in one borrow of the descriptor, the read with
// readBack. The switch uses it; the install reads back the same way in a
// borrow of its own (install); the retire step, which plans from its
// read-back, uses writeRead.
func (m *machine) guardedRead(step Step, now time.Time, obs *Observed, write func(tcpao.Socket) error) *AbortError {
	return m.guarded(step, func() error {
		return tcpao.Batch(m.sock, func(bs tcpao.Socket) error {
			if err := write(bs); err != nil {
				return err
			}
			m.readBack(bs, now, obs)
			return nil
		})
	})
}

// readBack reads bs after a write, bare (no fingerprints: the steps that
// use it plan nothing from the read), into obs and the status's counters.
// It reports whether the read succeeded; when it failed obs is left as it
// was.
func (m *machine) readBack(bs tcpao.Socket, now time.Time, obs *Observed) bool {
	o2, err := observeWith(bs, true)
	if err != nil {
		return false
	}
	m.st.Counters = CountersOf(o2, now)
	*obs = o2
	return true
}

// Apply runs ops in order on s and stops at the first error. It returns how
// many ops succeeded; the error names the op that failed. A socket that
// offers BatchKeys runs them all in one borrow of the descriptor, as a bare
// setsockopt loop would.
func Apply(s tcpao.Socket, ops []Op) (int, error) {
	if len(ops) <= 1 {
		return applyOps(s, ops)
	}
	var n int
	err := tcpao.Batch(s, func(bs tcpao.Socket) error {
		var err error
		n, err = applyOps(bs, ops)
		return err
	})
	return n, err
}

func applyOps(s tcpao.Socket, ops []Op) (int, error) {
	for i := range ops {
		if err := applyOp(s, &ops[i]); err != nil {
			return i, fmt.Errorf("op %d (%s): %w", i+1, ops[i].Line(), err)
		}
	}
	return len(ops), nil
}

func applyOp(s tcpao.Socket, op *Op) error {
	switch op.Kind {
	case OpAdd:
		return s.AddKey(op.Key, op.Add)
	case OpDel:
		return tcpao.DeleteKey(s, op.Del)
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

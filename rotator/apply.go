package rotator

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/aokeyd/aokeyd/tcpao"
)

// Observe reads a socket's TCP-AO state with TCP_AO_INFO and
// TCP_AO_GET_KEYS. A socket without TCP-AO (ENOENT) is reported with
// HaveAO false and no error. A socket that offers BatchKeys is read in one
// borrow of its descriptor (on bgp's sockets, one pidfd_getfd for both).
func Observe(s tcpao.Socket) (Observed, error) {
	if b, ok := s.(keyBatcher); ok {
		var o Observed
		err := b.BatchKeys(func(bs tcpao.Socket) error {
			var err error
			o, err = observeEach(bs)
			return err
		})
		return o, err
	}
	return observeEach(s)
}

func observeEach(s tcpao.Socket) (Observed, error) {
	info, err := s.Info()
	if errors.Is(err, syscall.ENOENT) {
		return Observed{}, nil
	}
	if err != nil {
		return Observed{}, fmt.Errorf("observe: TCP_AO_INFO: %w", err)
	}
	keys, err := s.Keys(tcpao.KeyFilter{})
	if err != nil {
		return Observed{}, fmt.Errorf("observe: TCP_AO_GET_KEYS: %w", err)
	}
	return Observed{HaveAO: true, Info: info, Keys: keys}, nil
}

// keyBatcher is a socket that can run many key operations in one borrow of
// its descriptor (tcpao's Linux sockets: BatchKeys).
type keyBatcher interface {
	BatchKeys(f func(tcpao.Socket) error) error
}

// Apply runs ops in order on s and stops at the first error. It returns how
// many ops succeeded; the error names the op that failed. A socket that
// offers BatchKeys runs them all in one borrow of the descriptor, as a bare
// setsockopt loop would.
func Apply(s tcpao.Socket, ops []Op) (int, error) {
	if b, ok := s.(keyBatcher); ok && len(ops) > 1 {
		var n int
		err := b.BatchKeys(func(bs tcpao.Socket) error {
			var err error
			n, err = applyOps(bs, ops)
			return err
		})
		return n, err
	}
	return applyOps(s, ops)
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

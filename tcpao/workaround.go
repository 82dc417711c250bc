package tcpao

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// Two kernel bugs around TCP_AO_DEL_KEY, fixed upstream in the stable trees
// but present on deployed kernels, that DeleteKey works around or refuses
// clearly:
//
//   - A key bound to a VRF (TCP_AO_KEYF_IFINDEX, non-zero ifindex) cannot be
//     deleted: tcp_ao_del_cmd() compared each key's l3index with a local that
//     was never set from the request (always 0), so the delete matched
//     nothing and returned ENOENT. No other form of the request matches such
//     a key on those kernels (a key with the flag and ifindex 0 is a
//     different key, of the default VRF), so there is nothing to retry.
//   - A key set Current_key or RNext_key while the socket was in TCP_CLOSE
//     keeps that role after listen(). A del_async of it on the listener
//     freed the key but left the pointer, and the next read (TCP_AO_INFO,
//     for one) used freed memory. Fixed kernels clear the pointers in the
//     del_async path.
var (
	// ErrKernelVRFDelete: the kernel answered ENOENT to the delete of a
	// VRF-scoped key that GET_KEYS still shows.
	ErrKernelVRFDelete = errors.New("tcpao: this kernel cannot delete keys bound to a VRF (TCP_AO_DEL_KEY ignores the ifindex and answers ENOENT; " +
		"fixed upstream in the Linux stable trees): the key stays installed until the socket closes; upgrade the kernel")
	// ErrListenerKeyInUse: the key is still Current_key or RNext_key of a
	// listening socket, so DeleteKey did not use del_async, and the kernel
	// refused the synchronous delete (EBUSY).
	ErrListenerKeyInUse = errors.New("tcpao: the listening socket still has the key as Current_key or RNext_key (set before listen()): " +
		"a del_async of it can use freed memory on kernels without the upstream fix, and the kernel refuses a synchronous delete (EBUSY); " +
		"the key stays until the listening socket is re-created")
)

// DeleteKey is s.DelKey(d) with the workarounds for the two kernel bugs
// above. Every caller that deletes a key from a socket it does not own goes
// through it (or through a Deleter, for a run of deletes).
//
//   - d.Async is kept only when the key is neither Current_key nor
//     RNext_key of the socket (one TCP_AO_INFO, and one GET_KEYS when the
//     socket has either set, which a listener normally has not); otherwise
//     the delete is synchronous. The kernel refuses del_async on a socket
//     that is not listening (EINVAL), so no other state is at risk.
//   - An ENOENT for a VRF-scoped key is checked with GET_KEYS: a key that is
//     gone is what the delete wanted (nil); one still there is
//     ErrKernelVRFDelete, wrapped with the kernel's error.
func DeleteKey(s Socket, d DelKey) error {
	return (&Deleter{S: s}).Delete(d)
}

// Deleter is DeleteKey for a run of deletes on one socket (a batch of a
// rotation): the check that keeps d.Async reads TCP_AO_INFO once for the
// run, not once per delete, once it found neither Current_key nor
// RNext_key set. That answer holds for the rest of the run: del_async is
// refused on every socket but a listening one, and a listening socket's
// Current_key and RNext_key can be cleared but never set (the kernel
// refuses both on TCP_LISTEN, in TCP_AO_ADD_KEY and TCP_AO_INFO alike).
// While either is set, every async delete is checked. A Deleter is used by
// one goroutine; its zero value with S set is ready.
type Deleter struct {
	S Socket
	// NoAsync deletes synchronously what asks for del_async: on a kernel
	// with a defect in that path (a Defect whose Mitigation is
	// SyncListenerDeletes, or one KernelDefects cannot place). No
	// TCP_AO_INFO is read then: a synchronous delete needs no check.
	NoAsync bool
	// noRoles: an Info read found neither Current_key nor RNext_key.
	noRoles bool
}

// Delete deletes d from the Deleter's socket, as DeleteKey does.
func (dl *Deleter) Delete(d DelKey) error {
	// Only a listening socket's deletes ask for del_async (the kernel
	// refuses it elsewhere), and a synchronous delete there fails with
	// EBUSY only for a key still Current_key or RNext_key.
	listener := d.Async
	if dl.NoAsync {
		d.Async = false
	}
	if d.Async && !dl.noRoles {
		var inUse bool
		inUse, dl.noRoles = listenerKeyInUse(dl.S, d.KeyRef)
		if inUse {
			d.Async = false
		}
	}
	s := dl.S
	err := s.DelKey(d)
	switch {
	case err == nil:
		return nil
	case listener && !d.Async && errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%w: %s: %w", ErrListenerKeyInUse, d.KeyRef, err)
	case d.IfIndex != 0 && !d.SetCurrent && !d.SetRNext && errors.Is(err, syscall.ENOENT):
		ref := d.KeyRef // a copy: &d.KeyRef would put every d on the heap
		ks, kerr := s.Keys(KeyFilter{Ref: &ref})
		if kerr != nil {
			return err
		}
		for _, k := range ks {
			if sameKey(k.KeyRef, d.KeyRef) {
				return fmt.Errorf("%w: %s: %w", ErrKernelVRFDelete, d.KeyRef, err)
			}
		}
		return nil // gone: what the delete wanted
	}
	return err
}

// listenerKeyInUse reports whether r may be the socket's Current_key or
// RNext_key, and whether the socket has neither set (noRoles; false when
// that could not be read). It errs towards inUse: a synchronous delete is
// always safe.
func listenerKeyInUse(s Socket, r KeyRef) (inUse, noRoles bool) {
	in, err := s.Info()
	if err != nil {
		return false, false // no TCP-AO (the delete fails on its own)
	}
	if !in.HaveCurrent && !in.HaveRNext {
		return false, true
	}
	ks, err := s.Keys(KeyFilter{Current: true, RNext: true})
	if err != nil {
		return true, false
	}
	for _, k := range ks {
		if (k.IsCurrent || k.IsRNext) && k.SendID == r.SendID && k.RecvID == r.RecvID && k.IfIndex == r.IfIndex &&
			unmapPrefix(k.Peer).Overlaps(unmapPrefix(r.Peer)) {
			return true, false
		}
	}
	return false, false
}

func sameKey(a, b KeyRef) bool {
	return a.SendID == b.SendID && a.RecvID == b.RecvID && a.IfIndex == b.IfIndex && unmapPrefix(a.Peer) == unmapPrefix(b.Peer)
}

// unmapPrefix spells an IPv4-mapped prefix as the IPv4 one, as the kernel
// stores it.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

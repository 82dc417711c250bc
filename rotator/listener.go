package rotator

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ErrOptMem is returned when a listener's key set cannot fit in
// net.core.optmem_max.
var ErrOptMem = errors.New("rotator: listener key set exceeds net.core.optmem_max")

// ListenerBatches splits a listener's plan into batches of at most
// peersPerBatch peers. Each peer's ops stay together and in plan order (its
// adds, then its deletes), so a peer's new key is added shortly before its
// old key is deleted instead of all adds first: a rotation of thousands of
// peers holds two keys only for the peers of one batch. Ops that are not
// about one key (ao_required) go in the first batch.
//
// Peers are taken in the order of their deletes in the plan, which is the
// order the kernel listed the keys in: newest installed first. The kernel
// adds keys at the head of its list and a delete walks from the head, so
// retiring the newest first finds each old key behind only the new keys
// added so far instead of behind every other old key (measured by `make
// bench`, item 2). Peers that only gain keys come last.
func ListenerBatches(sp SocketPlan, peersPerBatch int) [][]Op {
	if peersPerBatch <= 0 {
		peersPerBatch = 1
	}
	type peerOps struct {
		ops   []Op
		first int // index of the peer's first delete, else len+first op
	}
	var order []*peerOps
	byPeer := map[netip.Prefix]*peerOps{}
	var global []Op
	for i, op := range sp.Ops {
		if op.Kind == OpSetInfo {
			global = append(global, op)
			continue
		}
		p := normRef(op.Ref()).Peer
		po := byPeer[p]
		if po == nil {
			po = &peerOps{first: len(sp.Ops) + i}
			byPeer[p] = po
			order = append(order, po)
		}
		if op.Kind == OpDel && po.first >= len(sp.Ops) {
			po.first = i
		}
		po.ops = append(po.ops, op)
	}
	slices.SortStableFunc(order, func(a, b *peerOps) int { return cmp.Compare(a.first, b.first) })
	var out [][]Op
	cur := global
	n := 0
	for _, po := range order {
		if n == peersPerBatch {
			out = append(out, cur)
			cur, n = nil, 0
		}
		cur = append(cur, po.ops...)
		n++
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// CheckOptMem walks the batches from the observed key set and fails with
// ErrOptMem, before anything is changed, if the socket option memory would
// reach limit (net.core.optmem_max) at any point: the kernel would answer
// ENOMEM in the middle of the rotation. del_async returns the memory at
// once. It returns the peak in bytes.
func CheckOptMem(socket SocketID, obs Observed, batches [][]Op, limit int) (int, error) {
	used, keys := 0, len(obs.Keys)
	// The cost of each observed key by its reference: one map, so the
	// check stays linear in the key count (a scan per delete made it
	// quadratic: 37 s at 16,384 keys in the VM).
	cost := make(map[tcpao.KeyRef]int, len(obs.Keys))
	for _, k := range obs.Keys {
		c := tcpao.KeyOptMem(k.Algorithm)
		used += c
		if _, dup := cost[k.KeyRef]; !dup {
			cost[k.KeyRef] = c
		}
	}
	peak, peakKeys := used, keys
	for _, b := range batches {
		for _, op := range b {
			switch op.Kind {
			case OpAdd:
				used += tcpao.KeyOptMem(op.Key.Algorithm)
				keys++
			case OpDel:
				if c, ok := cost[normRef(op.Del.KeyRef)]; ok {
					used -= c
					keys--
				}
			}
			if used > peak {
				peak, peakKeys = used, keys
			}
		}
	}
	if limit > 0 && peak >= limit {
		return peak, fmt.Errorf("%w: listener %s needs %d bytes for %d keys at its peak, net.core.optmem_max is %d; raise it (sysctl -w net.core.optmem_max=%d) or use smaller batches",
			ErrOptMem, socket, peak, peakKeys, limit, peak+peak/4)
	}
	return peak, nil
}

// ListenerOptions tune SyncListener.
type ListenerOptions struct {
	// PeersPerBatch bounds how many peers' keys are doubled at once
	// (default 64).
	PeersPerBatch int
	// OptMemMax returns net.core.optmem_max (default tcpao.OptMemMax).
	OptMemMax func() (int, error)
}

// SyncListener converges a listening socket to d in batches, after checking
// that the key set fits in net.core.optmem_max. It returns the plan it ran
// (the applied prefix if an op failed). The caller runs it from the one
// goroutine that owns the listener.
func SyncListener(sock tcpao.Socket, d Desired, o ListenerOptions) (SocketPlan, error) {
	d.Kind = Listening
	if o.PeersPerBatch <= 0 {
		o.PeersPerBatch = 64
	}
	if o.OptMemMax == nil {
		o.OptMemMax = tcpao.OptMemMax
	}
	obs, err := Observe(sock)
	if err != nil {
		return SocketPlan{}, fmt.Errorf("listener %s: %w", d.Socket, err)
	}
	sp := PlanSocket(d, obs)
	if len(sp.Blocked) > 0 {
		return sp, fmt.Errorf("listener %s: %s", d.Socket, sp.Blocked[0].Detail)
	}
	batches := ListenerBatches(sp, o.PeersPerBatch)
	limit, err := o.OptMemMax()
	if err != nil {
		return sp, fmt.Errorf("listener %s: %w", d.Socket, err)
	}
	if _, err := CheckOptMem(d.Socket, obs, batches, limit); err != nil {
		return sp, err
	}
	done := sp
	done.Ops = done.Ops[:0:0]
	for _, b := range batches {
		n, err := Apply(sock, b)
		done.Ops = append(done.Ops, b[:n]...)
		if err != nil {
			return done, fmt.Errorf("listener %s: %w", d.Socket, err)
		}
	}
	return done, nil
}

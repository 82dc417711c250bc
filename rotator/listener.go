package rotator

import (
	"errors"
	"fmt"
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
// added so far instead of behind every other old key. Peers that only gain
// keys come last.
func ListenerBatches(sp SocketPlan, peersPerBatch int) [][]Op {
	_, batches := listenerBatches(slices.Clone(sp.Ops), peersPerBatch)
	return batches
}

// listenerBatches is ListenerBatches, also returning the batches' backing
// array: ops itself, reordered in place, of which the batches are
// consecutive pieces. It makes a fixed number of allocations whatever the
// peer count (a counting sort by peer: one map from peer to index, a few
// int32 arrays), where one slice and one record per peer plus a sort made a
// rotation of 16,384 peers allocate 370 MB; reordering in place spares a
// second array of every op (5.2 MB of SyncListener's 26.5 MB there).
func listenerBatches(ops []Op, peersPerBatch int) ([]Op, [][]Op) {
	if peersPerBatch <= 0 {
		peersPerBatch = 1
	}
	if len(ops) == 0 {
		return nil, nil
	}
	const global = -1
	peerOf := make([]int32, len(ops)) // op -> peer, global for OpSetInfo
	index := make(map[refKey]int32, len(ops)/2+1)
	var count []int32 // ops per peer
	nglobal := 0
	for i := range ops {
		if ops[i].Kind == OpSetInfo {
			peerOf[i] = global
			nglobal++
			continue
		}
		p := prefixKey(normRef(ops[i].Ref()).Peer)
		pi, ok := index[p]
		if !ok {
			pi = int32(len(count))
			index[p] = pi
			count = append(count, 0)
		}
		peerOf[i] = pi
		count[pi]++
	}
	// Peer order: by first delete (the kernel's listing order), then the
	// peers without deletes by their first op. order[k] is the k-th peer.
	npeers := len(count)
	order := make([]int32, 0, npeers)
	placed := make([]bool, npeers)
	for i := range ops {
		if pi := peerOf[i]; pi != global && ops[i].Kind == OpDel && !placed[pi] {
			placed[pi] = true
			order = append(order, pi)
		}
	}
	for pi := range npeers {
		if !placed[pi] {
			order = append(order, int32(pi))
		}
	}
	// Where each peer's ops start in the output: global ops first.
	start := make([]int32, npeers)
	at := int32(nglobal)
	for _, pi := range order {
		start[pi] = at
		at += count[pi]
	}
	// peerOf[i] becomes op i's place in the output.
	g := int32(0)
	for i := range ops {
		if pi := peerOf[i]; pi == global {
			peerOf[i] = g
			g++
		} else {
			peerOf[i] = start[pi]
			start[pi]++
		}
	}
	// start[pi] is now the end of peer pi's ops. Move each op to its place
	// by following the permutation's cycles: every swap puts one op where
	// it belongs.
	to := peerOf
	for i := range ops {
		for j := to[i]; j != int32(i); j = to[i] {
			ops[i], ops[j] = ops[j], ops[i]
			to[i], to[j] = to[j], j
		}
	}
	out := ops
	batches := make([][]Op, 0, npeers/peersPerBatch+1)
	from := 0
	for k := peersPerBatch - 1; k < npeers; k += peersPerBatch {
		end := int(start[order[k]])
		batches = append(batches, out[from:end:end])
		from = end
	}
	if from < len(out) {
		batches = append(batches, out[from:len(out):len(out)])
	}
	return out, batches
}

// CheckOptMem walks the batches from the observed key set and fails with
// ErrOptMem, before anything is changed, if the socket option memory would
// reach limit (net.core.optmem_max) at any point: the kernel would answer
// ENOMEM in the middle of the rotation. del_async returns the memory at
// once. It returns the peak in bytes.
func CheckOptMem(socket SocketID, obs Observed, batches [][]Op, limit int) (int, error) {
	return checkOptMem(socket, obs, batches, limit, false)
}

// checkOptMem is CheckOptMem. planned says that the batches come from
// PlanSocket on obs, whose deletes each name a distinct observed key: when
// every observed key then costs the same, a delete frees that cost and no
// index of the observed keys is needed.
func checkOptMem(socket SocketID, obs Observed, batches [][]Op, limit int, planned bool) (int, error) {
	used, keys := 0, len(obs.Keys)
	if planned && len(obs.Keys) > 0 {
		c := tcpao.KeyOptMem(obs.Keys[0].Algorithm)
		uniform := true
		for i := range obs.Keys {
			if tcpao.KeyOptMem(obs.Keys[i].Algorithm) != c {
				uniform = false
				break
			}
		}
		if uniform {
			return optMemPeak(socket, batches, limit, c*keys, keys, func(*Op) (int, bool) { return c, true })
		}
	}
	// The cost of each observed key by its reference: one map, so the
	// check stays linear in the key count (a scan per delete made it
	// quadratic: 37 s at 16,384 keys in the VM).
	cost := make(map[refKey]int32, len(obs.Keys))
	for i := range obs.Keys {
		k := &obs.Keys[i]
		c := tcpao.KeyOptMem(k.Algorithm)
		used += c
		r := keyOf(k.KeyRef)
		if _, dup := cost[r]; !dup {
			cost[r] = int32(c)
		}
	}
	return optMemPeak(socket, batches, limit, used, keys, func(op *Op) (int, bool) {
		c, ok := cost[keyOf(normRef(op.Del.KeyRef))]
		return int(c), ok
	})
}

// optMemPeak walks the batches from used bytes in keys keys; freed is what
// a delete returns and whether it names a present key.
func optMemPeak(socket SocketID, batches [][]Op, limit, used, keys int, freed func(*Op) (int, bool)) (int, error) {
	peak, peakKeys := used, keys
	for _, b := range batches {
		for i := range b {
			op := &b[i]
			switch op.Kind {
			case OpAdd:
				used += tcpao.KeyOptMem(op.Key.Algorithm)
				keys++
			case OpDel:
				if c, ok := freed(op); ok {
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
	// Carried are the keys the sessions accepted from the listener carry
	// (Observed.Carried): the planner keeps every listener key they name.
	Carried []tcpao.KeyRef
	// Down, when set, keeps the bases of the listener's keys no session
	// up carries (DownWatch; Observed.Down): Up must then be every key
	// the sessions that are up carry, all of them read. Nil: the rule
	// EditPeerDown is off for this sync, and the bases stay as they are.
	Down *DownWatch
	Up   []tcpao.KeyRef
	// SyncDeletes deletes the listener's keys synchronously instead of
	// with del_async, on a kernel with a defect in that path
	// (tcpao.SyncListenerDeletes). Each delete then waits for an RCU grace
	// period in the kernel: a large rotation takes longer, nothing else
	// changes (the plan, its batches and its optmem peak are the same).
	SyncDeletes bool
}

// ranSync clears del_async on every delete of ops, which ran synchronously
// (ListenerOptions.SyncDeletes): the plan SyncListener returns says how
// each op ran.
func ranSync(ops []Op) {
	for i := range ops {
		if ops[i].Kind == OpDel {
			ops[i].Del.Async = false
		}
	}
}

// SyncListener converges a listening socket to d in batches, after checking
// that the key set fits in net.core.optmem_max. It returns the plan it ran
// (the applied prefix if an op failed; with o.SyncDeletes, its deletes
// without del_async, as they ran). The caller runs it from the one
// goroutine that owns the listener.
func SyncListener(sock tcpao.Socket, d Desired, o ListenerOptions) (SocketPlan, error) {
	d.Kind = Listening
	if o.PeersPerBatch <= 0 {
		o.PeersPerBatch = 64
	}
	if o.OptMemMax == nil {
		o.OptMemMax = tcpao.OptMemMax
	}
	obs, err := observeKnown(sock, ReadFull, knownOf(&d))
	if err != nil {
		return SocketPlan{}, fmt.Errorf("listener %s: %w", d.Socket, err)
	}
	obs.Carried = o.Carried
	if o.Down != nil {
		obs.Down = o.Down.observe(d.Socket, &obs, o.Up)
	}
	sp := PlanSocket(d, obs)
	// An invalid desired state plans nothing; a change the never-strand
	// rule blocks (a replacement whose key in the way carries a session)
	// holds up only itself.
	for _, h := range sp.Blocked {
		if h.Why == ReasonInvalid {
			return sp, fmt.Errorf("listener %s: %s", d.Socket, h.Detail)
		}
	}
	ordered, batches := listenerBatches(sp.Ops, o.PeersPerBatch)
	limit, err := o.OptMemMax()
	if err != nil {
		return sp, fmt.Errorf("listener %s: %w", d.Socket, err)
	}
	if _, err := checkOptMem(d.Socket, obs, batches, limit, true); err != nil {
		return sp, err
	}
	// The batches are consecutive pieces of ordered: what ran is a prefix.
	done := sp
	applied := 0
	for _, b := range batches {
		n, err := apply(sock, b, o.SyncDeletes)
		applied += n
		if err != nil {
			done.Ops = ordered[:applied]
			if o.SyncDeletes {
				ranSync(done.Ops)
			}
			return done, fmt.Errorf("listener %s: %w", d.Socket, err)
		}
	}
	done.Ops = ordered
	if o.SyncDeletes {
		ranSync(done.Ops)
	}
	return done, nil
}

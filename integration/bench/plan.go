package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/rotator"
	"github.com/aokeyd/aokeyd/tcpao"
)

// planInputs builds the planner workload of rotator's BenchmarkPlan for n
// established peers: five keys per peer, four installed (the first stale and
// current), four desired, one to add and RNext to move.
func planInputs(n int) []rotator.Input {
	in := make([]rotator.Input, n)
	for i := range in {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		ks := make([]tcpao.Key, 5)
		for j := range ks {
			b := make([]byte, 16)
			copy(b, fmt.Sprintf("k%d-%d", i, j))
			ks[j] = tcpao.Key{KeyRef: tcpao.KeyRef{Peer: p, SendID: uint8(j), RecvID: uint8(j)}, Algorithm: tcpao.HMACSHA256, Secret: tcpao.NewSecret(b)}
		}
		d := rotator.Desired{Socket: rotator.SocketID(p.String()), WantCurrent: rotator.ID(4), WantRNext: rotator.ID(4)}
		for _, k := range ks[1:] {
			d.Keys = append(d.Keys, rotator.DesiredKey{Key: k})
		}
		o := rotator.Observed{HaveAO: true, Info: tcpao.Info{HaveCurrent: true, HaveRNext: true}}
		for j, k := range ks[:4] {
			o.Keys = append(o.Keys, tcpao.KeyInfo{KeyRef: k.KeyRef, Algorithm: k.Algorithm, MACLen: 12,
				Fingerprint: k.Secret.Fingerprint(), IsCurrent: j == 0, IsRNext: j == 0})
		}
		in[i] = rotator.Input{Desired: d, Observed: o}
	}
	return in
}

func zeroInputs(in []rotator.Input) {
	for _, x := range in {
		for _, k := range x.Desired.Keys {
			k.Secret.Zero()
		}
	}
}

// PlanSweep times rotator.PlanAll at each fleet size with testing.Benchmark
// and counts its allocations. It checks the plan's shape first, so that a
// planner that stopped doing the work cannot look fast.
func PlanSweep(sizes []int) ([]PlanPoint, error) {
	var out []PlanPoint
	for _, n := range sizes {
		in := planInputs(n)
		p := rotator.PlanAll(in)
		if len(p) != n || len(p[0].Ops) != 2 || len(p[0].Deferred) != 1 {
			zeroInputs(in)
			return nil, fmt.Errorf("planner sweep at %d peers: unexpected plan shape (%d sockets, %d ops, %d deferred)", n, len(p), len(p[0].Ops), len(p[0].Deferred))
		}
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rotator.PlanAll(in)
			}
		})
		zeroInputs(in)
		if r.N == 0 {
			return nil, fmt.Errorf("planner sweep at %d peers: benchmark did not run", n)
		}
		out = append(out, PlanPoint{Peers: n, NsPerOp: r.NsPerOp(), AllocsPerOp: r.AllocsPerOp(), BytesPerOp: r.AllocedBytesPerOp(), Runs: r.N})
	}
	return out, nil
}

// ParseGoBench reads `go test -bench -benchmem` output and returns its
// benchmark lines, tagged with where they ran.
func ParseGoBench(where string, r io.Reader) ([]GoBenchRow, error) {
	var out []GoBenchRow
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		row := GoBenchRow{Where: where, Name: f[0]}
		var err error
		if row.Runs, err = strconv.Atoi(f[1]); err != nil {
			continue // a benchmark's own log line, not a result
		}
		for i := 2; i+1 < len(f); i += 2 {
			switch f[i+1] {
			case "ns/op":
				row.NsPerOp, err = strconv.ParseFloat(f[i], 64)
			case "B/op":
				row.BytesPerOp, err = strconv.ParseInt(f[i], 10, 64)
			case "allocs/op":
				row.AllocsPerOp, err = strconv.ParseInt(f[i], 10, 64)
			default:
				var v float64
				if v, err = strconv.ParseFloat(f[i], 64); err == nil {
					if row.Extra == nil {
						row.Extra = map[string]float64{}
					}
					row.Extra[f[i+1]] = v
				}
			}
			if err != nil {
				return nil, fmt.Errorf("go bench output (%s): %q: field %s: %w", where, sc.Text(), f[i+1], err)
			}
		}
		out = append(out, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("go bench output (%s): %w", where, err)
	}
	return out, nil
}

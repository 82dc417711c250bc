package rotator

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// modelEvent is one event of a spin random simulation of
// rotator/model/roll.pml (make model-traces): what happened ("step",
// "timeout", "crash", "send", "recv", "lose", "deliver", "expire", "edit",
// "lsync", "reconnect") at which end, and the model's state after it.
type modelEvent struct {
	line  int
	kind  string
	end   int
	phase int // deliver, expire: the end's new phase
	// crashAfter: the end's aokeyd died after this many kernel writes of
	// the step (0: it did not).
	crashAfter int
	after      modelState
}

// modelState is one ST line: each end's machine state, session keys (mask,
// A=1 B=2, A's IDs with edited material 4), Current_key and RNext_key
// (IDs), listener keys, desired phase, whether its desired A is edited,
// and whether A on its listener verified a SYN (its pkt_good above zero).
type modelState struct {
	st     [2]State
	keys   [2]int
	cur    [2]int
	rnext  [2]int
	ln     [2]int
	phase  [2]int
	edited [2]int
	lgood  [2]int
}

func (s modelState) String() string {
	return fmt.Sprintf("%s %s %d %d %d %d %d %d %d %d %d %d %d %d %d %d", s.st[0], s.st[1], s.keys[0], s.cur[0], s.rnext[0],
		s.keys[1], s.cur[1], s.rnext[1], s.ln[0], s.ln[1], s.phase[0], s.phase[1], s.edited[0], s.edited[1], s.lgood[0], s.lgood[1])
}

type modelTrace struct {
	seed   int
	events []modelEvent // events[0] is init
}

// readModelTraces reads the gzipped traces of make model-traces.
func readModelTraces(path string) ([]modelTrace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return parseModelTraces(z)
}

func parseModelTraces(r io.Reader) ([]modelTrace, error) {
	var out []modelTrace
	var ev *modelEvent
	sc := bufio.NewScanner(r)
	n := 0
	bad := func(format string, a ...any) error {
		return fmt.Errorf("model traces line %d: %s", n, fmt.Sprintf(format, a...))
	}
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		nums := func(from int) ([]int, error) {
			var v []int
			for _, s := range f[from:] {
				x, err := strconv.Atoi(s)
				if err != nil {
					return nil, bad("%q: %v", sc.Text(), err)
				}
				v = append(v, x)
			}
			return v, nil
		}
		switch f[0] {
		case "TRACE":
			v, err := nums(1)
			if err != nil || len(v) != 1 {
				return nil, bad("want TRACE seed: %q", sc.Text())
			}
			dropCut(out, ev)
			out = append(out, modelTrace{seed: v[0]})
			ev = nil
		case "EV":
			if len(out) == 0 || len(f) < 2 {
				return nil, bad("event outside a trace: %q", sc.Text())
			}
			if ev != nil {
				return nil, bad("event without the state after the one before: %q", sc.Text())
			}
			v, err := nums(2)
			if err != nil {
				return nil, err
			}
			e := modelEvent{line: n, kind: f[1]}
			want := 1
			switch f[1] {
			case "init":
				want = 0
			case "deliver", "expire":
				want = 2
			}
			if len(v) != want {
				return nil, bad("event %q: want %d numbers", sc.Text(), want)
			}
			if want > 0 {
				e.end = v[0]
			}
			if want > 1 {
				e.phase = v[1]
			}
			t := &out[len(out)-1]
			t.events = append(t.events, e)
			ev = &t.events[len(t.events)-1]
		case "CRASHAT":
			v, err := nums(1)
			if err != nil || len(v) != 2 || ev == nil || ev.end != v[0] {
				return nil, bad("CRASHAT without its step: %q", sc.Text())
			}
			ev.crashAfter = v[1]
		case "ST":
			v, err := nums(3)
			if err != nil || len(v) != 14 || ev == nil {
				return nil, bad("want ST state state and 14 numbers after an event: %q", sc.Text())
			}
			ev.after = modelState{st: [2]State{State(f[1]), State(f[2])},
				keys: [2]int{v[0], v[3]}, cur: [2]int{v[1], v[4]}, rnext: [2]int{v[2], v[5]},
				ln: [2]int{v[6], v[7]}, phase: [2]int{v[8], v[9]}, edited: [2]int{v[10], v[11]}, lgood: [2]int{v[12], v[13]}}
			ev = nil
		default:
			return nil, bad("unknown line %q", sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	dropCut(out, ev)
	return out, nil
}

// dropCut drops a trace's last event when spin's step limit cut it before
// its state line.
func dropCut(out []modelTrace, ev *modelEvent) {
	if ev != nil {
		t := &out[len(out)-1]
		t.events = t.events[:len(t.events)-1]
	}
}

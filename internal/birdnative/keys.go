package birdnative

import (
	"regexp"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/internal/daemon"
	"github.com/aokeyd/aokeyd/tcpao"
)

// ids is a key's SendID and RecvID.
type ids [2]uint8

func idsOf(k bird.Key) ids { return ids{k.SendID, k.RecvID} }

// refOf is a file key's reference as the daemon's planner names it.
func refOf(id ids) tcpao.KeyRef { return daemon.ExecRef(id[0], id[1]) }

func idsOfRef(r tcpao.KeyRef) ids { return ids{r.SendID, r.RecvID} }

func cmpIDs(a, b ids) int {
	if a[0] != b[0] {
		return int(a[0]) - int(b[0])
	}
	return int(a[1]) - int(b[1])
}

// idSet is the IDs of l's keys, sorted.
func idSet(l daemon.ExecList) []ids {
	out := make([]ids, 0, len(l.Keys))
	for _, k := range l.Keys {
		out = append(out, idsOfRef(k.Ref))
	}
	slices.SortFunc(out, cmpIDs)
	return out
}

func zeroKeys(ks []bird.Key) {
	for _, k := range ks {
		k.Secret.Zero()
	}
}

var hexRun = regexp.MustCompile(`[0-9a-fA-F]{16,}`)

// maskHex hides any long hex run in a message from BIRD (a secret's hex
// could only come from a key file).
func maskHex(s string) string { return hexRun.ReplaceAllString(s, "[redacted]") }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

package birdnative

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/bgp/bird"
	"github.com/aokeyd/aokeyd/tcpao"
)

// ids is a key's SendID and RecvID.
type ids [2]uint8

func idsOf(k bird.Key) ids { return ids{k.SendID, k.RecvID} }

// anyPeer is the peer prefix of every key of a file as the planner sees
// it: BIRD's protocol has one neighbor, and its keys carry no prefix.
var anyPeer = netip.PrefixFrom(netip.IPv4Unspecified(), 0)

func refOf(id ids) tcpao.KeyRef { return tcpao.KeyRef{Peer: anyPeer, SendID: id[0], RecvID: id[1]} }

func idsOfRef(r tcpao.KeyRef) ids { return ids{r.SendID, r.RecvID} }

func cmpIDs(a, b ids) int {
	if a[0] != b[0] {
		return int(a[0]) - int(b[0])
	}
	return int(a[1]) - int(b[1])
}

func idSet(ks []bird.Key) []ids {
	out := make([]ids, 0, len(ks))
	for _, k := range ks {
		out = append(out, idsOf(k))
	}
	slices.SortFunc(out, cmpIDs)
	return out
}

// bare is ks's IDs and flags, without secrets.
func bare(ks []bird.Key) []bird.Key {
	out := make([]bird.Key, len(ks))
	for i, k := range ks {
		out[i] = bird.Key{SendID: k.SendID, RecvID: k.RecvID, Algorithm: k.Algorithm, Preferred: k.Preferred, Deprecated: k.Deprecated}
	}
	return out
}

func zeroKeys(ks []bird.Key) {
	for _, k := range ks {
		k.Secret.Zero()
	}
}

// keyIDs is "1/101 preferred, 2/102 deprecated": a list for the log.
func keyIDs(ks []bird.Key) string {
	var s []string
	for _, k := range ks {
		f := fmt.Sprintf("%d/%d", k.SendID, k.RecvID)
		if k.Preferred {
			f += " preferred"
		}
		if k.Deprecated {
			f += " deprecated"
		}
		s = append(s, f)
	}
	return strings.Join(s, ", ")
}

var hexRun = regexp.MustCompile(`[0-9a-fA-F]{16,}`)

// maskHex hides any long hex run in a message from BIRD (a secret's hex
// could only come from a key file).
func maskHex(s string) string { return hexRun.ReplaceAllString(s, "[redacted]") }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

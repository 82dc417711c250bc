package bird

import (
	"bufio"
	"net/netip"
	"strconv"
	"strings"
)

// Protocol is one protocol of `show protocols all`, with what a BGP
// protocol's block says of its session and TCP-AO.
type Protocol struct {
	Name, Proto string
	State       string // "up", "start", ...
	// Since is when the protocol entered State ("iso long" time format:
	// date and time, or time alone).
	Since    string
	BGPState string // "Established", "Active", ...
	Neighbor netip.Addr
	// The "TCP-AO:" block: Current and RNext key IDs (-1 when not
	// shown), good and bad segments.
	CurrentKey, RNextKey int
	PktGood, PktBad      uint64
	LastError            string
}

// ParseProtocols parses what `show protocols all` prints (as Command
// returns it): a header line per protocol, then its indented details.
func ParseProtocols(out string) []Protocol {
	var ps []Protocol
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			f := strings.Fields(line)
			if len(f) < 4 || f[0] == "Name" || f[0] == "BIRD" {
				continue
			}
			// peer_a  BGP  ---  up  2026-11-30 02:50:01.123  Established
			p := Protocol{Name: f[0], Proto: f[1], State: f[3], CurrentKey: -1, RNextKey: -1}
			if len(f) >= 5 {
				p.Since = f[4]
				if len(f) >= 6 && strings.Contains(f[5], ":") {
					p.Since += " " + f[5]
				}
			}
			ps = append(ps, p)
			continue
		}
		if len(ps) == 0 {
			continue
		}
		p := &ps[len(ps)-1]
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "BGP state":
			p.BGPState = val
		case "Neighbor address":
			if a, err := netip.ParseAddr(strings.Fields(val + " x")[0]); err == nil {
				p.Neighbor = a.Unmap()
			}
		case "Current key":
			p.CurrentKey, _ = strconv.Atoi(val)
		case "RNext key":
			p.RNextKey, _ = strconv.Atoi(val)
		case "Good packets":
			p.PktGood, _ = strconv.ParseUint(val, 10, 64)
		case "Bad packets":
			p.PktBad, _ = strconv.ParseUint(val, 10, 64)
		case "Last error":
			p.LastError = val
		}
	}
	return ps
}

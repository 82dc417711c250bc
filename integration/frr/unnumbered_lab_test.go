package frr

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/aokeyd/aokeyd/bgp/sockets"
	"github.com/aokeyd/aokeyd/integration/lab"
	"github.com/aokeyd/aokeyd/internal/testkit/netns"
	"github.com/aokeyd/aokeyd/tcpao"
)

// The unnumbered fabric of issue 53, the lab part only (no aokeyd here):
// routers r1..rN, each a network namespace with FRR under its own
// watchfrr (zebra, mgmtd, staticd, bgpd: zebra is what learns a
// neighbor's link-local address from its router advertisements and tells
// bgpd), in a ring of veth links (N=3: a triangle). Invariants:
//
//   - Link i joins ri's swp1 and r(i+1)'s swp2: every router has swp1
//     (to the next router) and swp2 (to the previous), and peers with
//     both as `neighbor swpX interface remote-as external`.
//   - The links carry IPv6 link-local addresses only (the kernel's
//     EUI-64 ones from the MACs the lab gives); no address is configured
//     anywhere, the routers' IPv4 prefixes travel with IPv6 next hops.
//   - Router advertisements are on on every link (zebra.conf), so each
//     bgpd learns its neighbors' addresses at run time.
//   - Every wait is bounded and polls for the event (lab.Eventually).

// unnumRouters is the fabric's size: three routers, three links.
const unnumRouters = 3

// fabricUp bounds the wait for the fabric's sessions after FRR starts or
// a deliberate reset: RAs (3 s apart), bgpd's connect retry (1 s) and
// process starts on an emulated guest kept busy by the host.
const fabricUp = 3 * time.Minute

// fabRouter is one router of the fabric.
type fabRouter struct {
	name      string // r1, r2, ...
	as        uint32
	id        netip.Addr // router-id
	route     string     // the prefix it announces
	ns        *netns.NS
	dir       string // its aokeyd's directory and FRR's etc-frr
	pathspace string
	cg        string // its `aokeyd exec` connect guard socket
	frr       *Router
	ad        *aokeyd // nil in the lab part
}

// fabEnd is one end of a link: a router's interface neighbor.
type fabEnd struct {
	r     *fabRouter
	iface string
	far   *fabRouter
	farIf string
}

func (e fabEnd) String() string { return e.r.name + " " + e.iface }

// fabric is the lab: its routers and both ends of every link.
type fabric struct {
	t       *testing.T
	routers []*fabRouter
	ends    []fabEnd // link i+1's ends are ends[2i] (r(i+1) swp1) and ends[2i+1]
	links   int
	// want is each end's expected connectionsEstablished (by its String):
	// the baseline plus the deliberate resets (unnumbered_test.go).
	want map[string]uint32
	// bad is the highest pkt_bad seen on each session socket (by inode).
	bad map[uint64]uint64
}

// mac is the MAC of router r's interface swpN (gen counts the MACs
// given to it: a flap with a new MAC gives a new link-local address).
func mac(r, n, gen int) string { return fmt.Sprintf("02:53:%02x:%02x:%02x:01", gen, r, n) }

// newFabric makes n namespaces and the ring of links between them, and
// waits until every link's two link-local addresses are usable (past
// DAD). FRR is not started.
func newFabric(t *testing.T, n int) *fabric {
	t.Helper()
	f := &fabric{t: t, links: n}
	for i := range n {
		name := fmt.Sprintf("r%d", i+1)
		f.routers = append(f.routers, &fabRouter{name: name, as: uint32(65300 + i + 1),
			id: netip.AddrFrom4([4]byte{10, 255, 53, byte(i + 1)}), route: fmt.Sprintf("198.18.53.%d/32", i+1),
			ns: netns.New(t, lab.NSName(t, name)), dir: t.TempDir(), pathspace: fmt.Sprintf("aokeydun%dr%d", os.Getpid(), i+1)})
	}
	for i, a := range f.routers {
		b := f.routers[(i+1)%n]
		a.ns.MustBatch(t, fmt.Sprintf("link add swp1 address %s type veth peer name swp2 address %s netns %s\nlink set swp1 up\n",
			mac(i+1, 1, 0), mac((i+1)%n+1, 2, 0), b.ns.Name))
		b.ns.MustBatch(t, "link set swp2 up\n")
		f.ends = append(f.ends, fabEnd{r: a, iface: "swp1", far: b, farIf: "swp2"},
			fabEnd{r: b, iface: "swp2", far: a, farIf: "swp1"})
	}
	lab.Eventually(t, 30*time.Second, "every link's link-local addresses past DAD", func() (bool, string) {
		for _, e := range f.ends {
			if _, err := linkLocal(e.r.ns, e.iface); err != nil {
				return false, err.Error()
			}
		}
		return true, ""
	})
	return f
}

// linkLocal is iface's one IPv6 link-local address in ns, an error while
// it is tentative (DAD) or absent.
func linkLocal(ns *netns.NS, iface string) (netip.Addr, error) {
	out, err := ns.Run("ip", "-j", "-6", "addr", "show", "dev", iface, "scope", "link")
	if err != nil {
		return netip.Addr{}, err
	}
	var links []struct {
		AddrInfo []struct {
			Local     string `json:"local"`
			Tentative bool   `json:"tentative"`
			DADFailed bool   `json:"dadfailed"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil {
		return netip.Addr{}, fmt.Errorf("ip -j addr: %w: %.200s", err, out)
	}
	var found []netip.Addr
	for _, l := range links {
		for _, a := range l.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err != nil || !addr.IsLinkLocalUnicast() {
				continue
			}
			if a.Tentative || a.DADFailed {
				return netip.Addr{}, fmt.Errorf("%s %s: %s tentative or DAD failed", ns.Name, iface, addr)
			}
			found = append(found, addr)
		}
	}
	if len(found) != 1 {
		return netip.Addr{}, fmt.Errorf("%s %s: link-local addresses %v, want one", ns.Name, iface, found)
	}
	return found[0], nil
}

var zebraTmpl = template.Must(template.New("zebra").Parse(`! generated by integration/frr (issue 53's fabric)
hostname {{.Name}}
log file {{.Run}}/zebra.log informational
{{- range .Ifaces}}
interface {{.}}
 ipv6 nd ra-interval 3
 no ipv6 nd suppress-ra
exit
{{- end}}
`))

var unnumBgpdTmpl = template.Must(template.New("bgpd").Parse(`! generated by integration/frr (issue 53's fabric)
frr defaults traditional
hostname {{.Name}}
log file {{.Run}}/bgpd.log informational
router bgp {{.AS}}
 bgp router-id {{.ID}}
 no bgp ebgp-requires-policy
 no bgp network import-check
 timers bgp 3 9
{{- range .Ifaces}}
 neighbor {{.}} interface remote-as external
 neighbor {{.}} timers connect 1
 neighbor {{.}} advertisement-interval 0
{{- end}}
 address-family ipv4 unicast
  network {{.Route}}
 exit-address-family
 address-family ipv6 unicast
{{- range .Ifaces}}
  neighbor {{.}} activate
{{- end}}
 exit-address-family
exit
`))

// frrFiles are r's zebra.conf and bgpd.conf. Hold time 9 s (keepalive
// 3 s), not the other labs' 3 s: six sessions and fifteen FRR daemons
// share the emulated guest, and a hold timer expiring there is a flap
// the scenario counts.
func (r *fabRouter) frrFiles() map[string]string {
	data := struct {
		Name, Run, Route string
		AS               uint32
		ID               netip.Addr
		Ifaces           []string
	}{r.name, filepath.Join(frrRunDir, r.pathspace), r.route, r.as, r.id, []string{"swp1", "swp2"}}
	out := map[string]string{}
	for name, tmpl := range map[string]*template.Template{"zebra.conf": zebraTmpl, "bgpd.conf": unnumBgpdTmpl} {
		var b bytes.Buffer
		if err := tmpl.Execute(&b, data); err != nil {
			panic(err) // the templates are constants
		}
		out[name] = b.String()
	}
	return out
}

// startFRR starts every router's FRR under its watchfrr, side by side;
// wrapped, bgpd runs under `aokeyd exec` on the router's connect guard
// (its aokeyd must be running: bgpd's first connect waits for it).
func (f *fabric) startFRR(wrapped bool) {
	f.t.Helper()
	lab.All(f.t, len(f.routers), func(i int) {
		r := f.routers[i]
		r.cg = filepath.Join(r.dir, "cg.sock")
		r.frr = StartWatchfrrFiles(f.t, r.ns, r.dir, r.pathspace, PathspaceFiles{Conf: r.frrFiles(), NoWrap: !wrapped}, r.cg)
		r.frr.WaitUp(f.t)
	})
	f.t.Cleanup(func() {
		if f.t.Failed() {
			for _, r := range f.routers {
				if r.frr == nil {
					continue
				}
				lab.Dump(f.t, r.name+"'s zebra.log (tail)", lab.Tail(filepath.Join(r.frr.Dir, "zebra.log"), 4000))
				out, _ := r.frr.Vtysh("show bgp vrf default neighbors json")
				lab.Dump(f.t, r.name+"'s show bgp neighbors json", out)
			}
		}
	})
}

// nbrView is bgpd's view of one interface neighbor (`show bgp vrf default
// neighbors json`, keyed by the interface's name).
type nbrView struct {
	State    string
	Addr     netip.Addr // bgpNeighborAddr: invalid while unknown ("none")
	Conns    uint32     // connectionsEstablished: this bgpd's count
	Accepted int        // prefixes accepted, all address families
}

func (v nbrView) String() string {
	return fmt.Sprintf("%s %v (established %d times, %d prefixes)", v.State, v.Addr, v.Conns, v.Accepted)
}

// neighbors reads r's interface neighbors.
func (r *fabRouter) neighbors() (map[string]nbrView, error) {
	out, err := r.frr.Vtysh("show bgp vrf default neighbors json")
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &top); err != nil {
		return nil, fmt.Errorf("%s neighbors json: %w: %.300s", r.name, err, out)
	}
	views := map[string]nbrView{}
	for _, iface := range []string{"swp1", "swp2"} {
		raw, ok := top[iface]
		if !ok {
			continue
		}
		var n struct {
			Addr  string `json:"bgpNeighborAddr"`
			State string `json:"bgpState"`
			Conns uint32 `json:"connectionsEstablished"`
			AF    map[string]struct {
				Accepted int `json:"acceptedPrefixCounter"`
			} `json:"addressFamilyInfo"`
		}
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, fmt.Errorf("%s neighbor %s: %w", r.name, iface, err)
		}
		v := nbrView{State: n.State, Conns: n.Conns}
		if a, err := netip.ParseAddr(n.Addr); err == nil {
			v.Addr = a.WithZone("")
		}
		for _, af := range n.AF {
			v.Accepted += af.Accepted
		}
		views[iface] = v
	}
	return views, nil
}

// view is e's neighbor as e's bgpd sees it.
func (e fabEnd) view() (nbrView, error) {
	vs, err := e.r.neighbors()
	if err != nil {
		return nbrView{}, err
	}
	v, ok := vs[e.iface]
	if !ok {
		return nbrView{}, fmt.Errorf("%s: bgpd has no neighbor %s", e.r.name, e.iface)
	}
	return v, nil
}

// up reports whether e's session is Established with the far interface's
// current link-local address learned and routes from it, and returns
// the view and what is missing.
func (e fabEnd) up() (nbrView, bool, string) {
	v, err := e.view()
	if err != nil {
		return v, false, err.Error()
	}
	want, err := linkLocal(e.far.ns, e.farIf)
	if err != nil {
		return v, false, err.Error()
	}
	ok := v.State == "Established" && v.Addr == want && v.Accepted > 0
	return v, ok, fmt.Sprintf("%s: %s, far address %s", e, v, want)
}

// session reads the keys and counters of e's session socket straight from
// the kernel (a pidfd_getfd duplicate of bgpd's descriptor), found by the
// learned address (sock_diag gives it without its zone). A socket without
// TCP-AO gives no keys and the kernel's error for its info.
func (e fabEnd) session(addr netip.Addr) (sockets.Ref, []tcpao.KeyInfo, tcpao.Info, error) {
	refs, err := sockets.System{}.Connections(e.r.frr.PID, addr.WithZone(""))
	if err != nil {
		return sockets.Ref{}, nil, tcpao.Info{}, err
	}
	if len(refs) != 1 {
		return sockets.Ref{}, nil, tcpao.Info{}, fmt.Errorf("%s: %d connections of bgpd (pid %d) to %s, want 1", e, len(refs), e.r.frr.PID, addr)
	}
	var ks []tcpao.KeyInfo
	var info tcpao.Info
	err = sockets.System{}.With(refs[0], func(fd int) error {
		var err error
		if ks, err = tcpao.FromFD(fd).Keys(tcpao.KeyFilter{SkipFingerprint: true}); err != nil {
			return err
		}
		info, err = tcpao.FromFD(fd).Info()
		return err
	})
	return refs[0], ks, info, err
}

// waitUnsigned waits for the lab itself: every end Established over
// link-local addresses learned from RAs, routes both ways, and no TCP-AO
// on any session socket (nothing binds them yet). It logs each session.
func (f *fabric) waitUnsigned() {
	t := f.t
	t.Helper()
	lab.Eventually(t, fabricUp, "lab: every unnumbered session Established over IPv6 link-local, routes both ways", func() (bool, string) {
		for _, e := range f.ends {
			if _, ok, detail := e.up(); !ok {
				return false, detail
			}
		}
		return true, ""
	})
	for _, e := range f.ends {
		v, _ := e.view()
		ref, ks, _, err := e.session(v.Addr)
		switch {
		case err == nil && len(ks) > 0:
			t.Fatalf("lab: %s's session to %s has %d TCP-AO keys before any policy binds it", e, v.Addr, len(ks))
		case err != nil && ref.PID == 0:
			t.Fatalf("lab: %s's session socket to %s: %v", e, v.Addr, err)
		}
		t.Logf("lab: %s ↔ %s %s: %s, socket %s → %s unsigned (%v)", e, e.far.name, e.farIf, v, ref.Local, ref.Remote, err)
	}
	t.Logf("lab: %d routers, %d links, %d sessions up unsigned over IPv6 link-local (FRR %s)", len(f.routers), f.links, len(f.ends), Version())
}

// labOnly reports whether AOKEYD_UNNUM_LAB_ONLY=1 (in the guest through
// AOKEYD_GUEST_ENV) asks for the lab alone (FRR without aokeyd, bgpd not
// wrapped): for debugging the fabric in the guest before anything of
// issue 53 is involved.
func labOnly() bool { return strings.TrimSpace(os.Getenv("AOKEYD_UNNUM_LAB_ONLY")) == "1" }

package conformance

import (
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

func infoCases() []Case {
	return []Case{
		{"info/read-modify-write", func(t *testing.T, e env) {
			s := e.socket(lo4)
			e.wantErr("ao_required", s.SetInfo(tcpao.InfoChange{AORequired: bl(true)}), nil)
			e.wantErr("accept_icmps", s.SetInfo(tcpao.InfoChange{AcceptICMPs: bl(true)}), nil)
			if in := e.info(s); !in.AORequired || !in.AcceptICMPs {
				t.Fatalf("Info = %+v, want both flags kept", in)
			}
			e.wantErr("clear ao_required", s.SetInfo(tcpao.InfoChange{AORequired: bl(false)}), nil)
			if in := e.info(s); in.AORequired || !in.AcceptICMPs {
				t.Fatalf("Info = %+v, want ao_required off, accept_icmps on", in)
			}
			e.wantKeys("no keys", e.keys(s, tcpao.KeyFilter{}))
		}},
		{"info/ao-required-listener-without-keys", func(t *testing.T, e env) {
			l := e.socket(lo4)
			e.wantErr("ao_required", l.SetInfo(tcpao.InfoChange{AORequired: bl(true)}), nil)
			if err := e.s.Listen(l); err != nil {
				t.Fatal(err)
			}
			c := e.socket(cli4)
			_, err := e.s.Connect(c, l)
			e.wantErr("unsigned connect", err, ErrTimeout)
			if in := e.info(l); !in.AORequired || in.PktAORequired == 0 {
				t.Fatalf("listener Info = %+v", in)
			}
		}},
		{"info/reset-counters-and-filters", func(t *testing.T, e env) {
			pr, cl, _ := rotationPair(e)
			if in := e.info(pr.l); in.PktGood == 0 {
				t.Fatalf("listener Info = %+v, want handshake counted", in)
			}
			e.wantErr("reset", pr.l.SetInfo(tcpao.InfoChange{ResetCounters: true}), nil)
			if in := e.info(pr.l); in.PktGood != 0 || in.PktBad != 0 || in.PktKeyNotFound != 0 || in.PktAORequired != 0 {
				t.Fatalf("listener Info after reset = %+v", in)
			}
			e.wantKeys("current", e.keys(pr.c, tcpao.KeyFilter{Current: true}), want{k: cl[0], cur: true, rnext: true, name: "one"})
			e.wantKeys("rnext", e.keys(pr.c, tcpao.KeyFilter{RNext: true}), want{k: cl[0], cur: true, rnext: true, name: "one"})
			e.wantErr("rnext two", pr.c.SetInfo(tcpao.InfoChange{RNext: u8(12)}), nil)
			e.wantKeys("current or rnext", e.keys(pr.c, tcpao.KeyFilter{Current: true, RNext: true}),
				want{k: cl[0], cur: true, name: "one"}, want{k: cl[1], rnext: true, name: "two"})
			r := cl[1].KeyRef
			e.wantKeys("exact", e.keys(pr.c, tcpao.KeyFilter{Ref: &r}), want{k: cl[1], rnext: true, name: "two"})
		}},
	}
}

package daemon

import (
	"log/slog"

	"github.com/aokeyd/aokeyd/internal/control"
	"github.com/aokeyd/aokeyd/tcpao"
)

// NewKernel is the Kernel of release (uname -r, tcpao.UnameRelease) with
// the algorithms it accepts: its known TCP-AO defects from tcpao's table,
// or why the table cannot place it.
//
// aokeyd's policy on a kernel the table cannot place (a release it does
// not understand, "" included, or a version older than TCP-AO upstream,
// which a kernel that has TCP-AO only is as a vendor backport with fixes
// nobody can tell) is to assume the worst: every mitigation applies.
func NewKernel(release string, algorithms map[tcpao.Algorithm]error) Kernel {
	k := Kernel{Release: "Linux " + release, Algorithms: algorithms}
	if release == "" {
		k.Release = "Linux (release unknown)"
	}
	_, k.Defects, k.Unplaced = tcpao.KernelDefects(release)
	return k
}

// Mitigations are what aokeyd does on k: those of its defects, all of them
// when k could not be placed, none for a kernel not probed (the zero
// Kernel, of tests that run on the in-memory kernel).
func (k Kernel) Mitigations() tcpao.Mitigation {
	if k.Unplaced != nil {
		return tcpao.AllMitigations
	}
	return tcpao.Mitigations(k.Defects)
}

// SyncListenerDeletes reports whether the listeners' keys are deleted
// synchronously on k (tcpao.SyncListenerDeletes): the listener sync's and
// the revoke's deletes then never use del_async.
func (k Kernel) SyncListenerDeletes() bool { return k.Mitigations()&tcpao.SyncListenerDeletes != 0 }

// Status is k as status shows it; the server's Complete derives a warning
// from each defect and from Unplaced.
func (k Kernel) Status() *control.KernelStatus {
	st := &control.KernelStatus{Release: k.Release, Accepted: []string{}}
	for _, a := range tcpao.Algorithms {
		if k.Algorithms[a] == nil {
			st.Accepted = append(st.Accepted, string(a))
		} else {
			st.Refused = append(st.Refused, string(a))
		}
	}
	for _, d := range k.Defects {
		st.Defects = append(st.Defects, control.KernelDefectOf(d))
	}
	if k.Unplaced != nil {
		st.Unplaced = k.Unplaced.Error()
	}
	if m := k.Mitigations(); m != 0 {
		st.Mitigation = m.String()
	}
	return st
}

// LogDefects logs, at start, each known TCP-AO defect of k (the kernel,
// the defect, the releases that fix it and what aokeyd does), or that k
// could not be checked and aokeyd assumes the worst. A kernel without
// known defects logs nothing here.
func (k Kernel) LogDefects(log *slog.Logger) {
	for _, d := range k.Defects {
		log.Warn("kernel has a known TCP-AO defect; upgrade it", "kernel", k.Release, "defect", d.ID, "summary", d.Summary,
			"fixed_in", d.Fixed(), "mitigation", d.Mitigation.String())
	}
	if k.Unplaced != nil {
		log.Warn("kernel release cannot be checked for known TCP-AO defects; assuming it has them all", "kernel", k.Release,
			"err", k.Unplaced, "mitigation", k.Mitigations().String())
	}
}

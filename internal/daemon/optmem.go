package daemon

// raiseState is the last kernel.raise_optmem outcome, so that a pass logs
// only what changed.
type raiseState struct {
	pid, target, limit int
	err                string
}

// optMemTarget is the net.core.optmem_max a listener whose keys take need
// bytes is given: a quarter more for the add-before-delete batches of a
// roll and for keys that arrive before the next pass, plus 64 KiB, rounded
// up to 4 KiB.
func optMemTarget(need int) int {
	t := need + need/4 + 64<<10
	return (t + 4095) &^ 4095
}

// raiseOptMem asks for optMemTarget(need) in the speaker's namespace and
// returns the limit there when it could be read.
func (rc *reconciler) raiseOptMem(pid, need int) (int, bool) {
	target := optMemTarget(need)
	before, after, err := rc.o.RaiseOptMem(pid, target)
	st := raiseState{pid: pid, target: target, limit: after}
	if err != nil {
		st.err = err.Error()
	}
	last := rc.raised
	rc.raised = st
	switch {
	case err != nil:
		if st != last {
			rc.log.Warn("kernel.raise_optmem: could not raise net.core.optmem_max in the speaker's network namespace",
				"pid", pid, "target", target, "needed", need, "err", err)
		}
		return after, after > 0
	case after > before:
		rc.log.Info("raised net.core.optmem_max in the speaker's network namespace",
			"pid", pid, "from", before, "to", after, "needed", need)
	}
	return after, true
}

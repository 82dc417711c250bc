package rotator

// States are the roll machine's states, in the order a roll passes them
// (StateDown last): the names rotator/model/roll.pml uses.
func States() []State {
	return []State{StateSteady, StateAnnounced, StateGrace, StateBackoff, StateDown}
}

// Steps are the kernel-writing steps of a roll that the SessionGuard is
// consulted around: the names rotator/model/roll.pml uses.
func Steps() []Step {
	return []Step{StepInstall, StepAnnounce, StepSwitch, StepRetire, StepRestore}
}

package control

// EditRule says which rule decided an edit in place of one of a peer's
// keys: new material (secret, algorithm, MAC length or tcp_options) in
// the key source under the IDs of an installed key (rotator.EditRule).
// Readers compare it with the constants below, never its text.
type EditRule string

// Edit rules: the applied-* ones replaced the installed key.
const (
	// EditAppliedUnused: the installed key authenticated nothing (no good
	// segments, carried by no session, neither Current_key nor RNext_key).
	EditAppliedUnused EditRule = "applied-unused"
	// EditAppliedPeerDown: the peer is down and its new connections fail
	// against the installed key (bad segments, no good one since its
	// session ended).
	EditAppliedPeerDown EditRule = "applied-peer-down"
	// EditAppliedApproved: aoctl replace approved it.
	EditAppliedApproved EditRule = "applied-approved"
	// EditHeldInUse: the installed key authenticated segments or carries
	// a session: it stays.
	EditHeldInUse EditRule = "held-in-use"
	// EditHeldUnread: what the sessions carry is not read yet since the
	// start (or the key's chain is degraded): the installed key stays.
	EditHeldUnread EditRule = "held-unread"
	// EditHeldUnsettled: the installed key authenticated nothing, but the
	// peer was not yet seen to choose its key since aokeyd last set
	// Current_key or RNext_key: it stays until it is.
	EditHeldUnsettled EditRule = "held-unsettled"
)

// Applied reports whether the rule replaced the installed key.
func (r EditRule) Applied() bool {
	return r == EditAppliedUnused || r == EditAppliedPeerDown || r == EditAppliedApproved
}

// Text is the rule for people, as aoctl status shows it.
func (r EditRule) Text() string {
	switch r {
	case EditAppliedUnused:
		return "edit applied: key authenticated nothing"
	case EditAppliedPeerDown:
		return "edit applied: peer down, its connections fail against the installed key"
	case EditAppliedApproved:
		return "edit applied: approved with aoctl replace"
	case EditHeldInUse:
		return "edit held: the installed key authenticated segments or carries a session (new IDs and a roll, or aoctl replace, apply it)"
	case EditHeldUnread:
		return "edit held: the sessions' keys are not read yet since the start, or the key's chain is degraded"
	case EditHeldUnsettled:
		return "edit held: the installed key authenticated nothing; waiting to see the peer choose its key"
	}
	return "edit: " + string(r)
}

// Edit sockets (EditStatus.Socket).
const (
	EditSession  = "session"
	EditListener = "listener"
)

// EditStatus is one edit in place of a key of the peer's on one of its
// sockets: held back, or applied (shown while the key source keeps the
// material it applied). It has no field for key bytes.
type EditStatus struct {
	// Chain and Key name the key in the key source ("" when it has no
	// key of those IDs).
	Chain  string `json:"chain,omitempty"`
	Key    string `json:"key,omitempty"`
	SendID uint8  `json:"send_id"`
	RecvID uint8  `json:"recv_id"`
	// Socket is EditSession (the peer's established socket) or
	// EditListener (the listening sockets' entry for the peer).
	Socket string   `json:"socket"`
	Rule   EditRule `json:"rule"`
	// Applied: the new material replaced the installed key (Rule.Applied).
	Applied bool `json:"applied"`
}

package daemon

import (
	"net/netip"
	"sync"

	"github.com/aokeyd/aokeyd/tcpao"
)

// ownership is the ownership part: the ledger of the keys aokeyd
// installed (owned.go, owned_md5.go) and the operator's claims on keys it
// did not: aoctl adopt (adopt.go) and aoctl replace's approvals of an edit
// in place (replace.go). It alone writes the ledger and the approvals; the
// passes ask it whose a socket's keys are (owner), which approved edits a
// desired state carries (approvedRefs, approvedMD5), and record through it
// what they install.
type ownership struct {
	*core
	led *ledger // which installed keys are aokeyd's

	mu       sync.Mutex
	approved map[string]material // aoctl replace: edits in place approved, by chain/key
	// md5Approved are TCP-MD5 password changes approved (aoctl replace
	// --md5), by peer prefix: the password approved, by fingerprint.
	md5Approved map[netip.Prefix]tcpao.Fingerprint
}

// owner is the ledger's view of the speaker process pid (owned.go).
func (ow *ownership) owner(pid int) *procOwner { return ow.led.owner(pid) }

// record notes a key aokeyd installed (owned.go).
func (ow *ownership) record(p procID, cookie uint64, r tcpao.KeyRef, fp tcpao.Fingerprint, adopted bool) {
	ow.led.record(p, cookie, r, fp, adopted)
}

// recordMD5 notes a TCP-MD5 password aokeyd installed (owned_md5.go).
func (ow *ownership) recordMD5(p netip.Prefix, fp tcpao.Fingerprint) { ow.led.recordMD5(p, fp) }

// ownsMD5 reports whether aokeyd installed the password (owned_md5.go).
func (ow *ownership) ownsMD5(p netip.Prefix, fp tcpao.Fingerprint) bool { return ow.led.ownsMD5(p, fp) }

// warning is what status warns of the record ("" when nothing).
func (ow *ownership) warning() string { return ow.led.warning() }

// close writes what the ledger has not written yet and stops its timer.
func (ow *ownership) close() error { return ow.led.close() }

// approvedMD5 is the TCP-MD5 password approved for the peer prefix.
func (ow *ownership) approvedMD5(p netip.Prefix) (tcpao.Fingerprint, bool) {
	ow.mu.Lock()
	defer ow.mu.Unlock()
	fp, ok := ow.md5Approved[p]
	return fp, ok
}

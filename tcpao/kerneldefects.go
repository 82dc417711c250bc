package tcpao

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The kernel releases with known TCP-AO defects, as data: which defect,
// which releases it affects and what a user of this package does about it.
// The table lives here, beside DelKey, because the defects are facts of the
// kernel's TCP-AO code that every user of the binding meets; what to do on
// a kernel that cannot be placed (an unparsable release, a vendor backport)
// is the caller's policy, for which AllMitigations is the safe answer.
//
// Only defects whose affected ranges are published go in the table. The
// later 6.12 stable fixes (key deletion in VRFs, a use-after-free on
// reconnect) are not in it: their ranges are not known here. DeleteKey
// handles the VRF one on every kernel (ErrKernelVRFDelete).

// KernelVersion is an upstream Linux version read from a release string
// (uname -r). RC is the release candidate number of a pre-release ("-rc5"),
// 0 for a release: a pre-release comes before its release.
type KernelVersion struct {
	Major, Minor, Patch, RC int
}

// String spells v as a release: "6.12.95", "6.18.0-rc5".
func (v KernelVersion) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.RC > 0 {
		s += fmt.Sprintf("-rc%d", v.RC)
	}
	return s
}

// Compare orders versions: -1 when v comes before w, 0 when equal, +1
// after. A release candidate comes before the release of the same number.
func (v KernelVersion) Compare(w KernelVersion) int {
	for _, d := range [...]int{v.Major - w.Major, v.Minor - w.Minor, v.Patch - w.Patch} {
		if d != 0 {
			return sign(d)
		}
	}
	switch {
	case v.RC == w.RC:
		return 0
	case v.RC == 0:
		return 1
	case w.RC == 0:
		return -1
	}
	return sign(v.RC - w.RC)
}

func sign(d int) int {
	if d < 0 {
		return -1
	}
	return 1
}

// sameLine reports whether v and w are of one stable line (6.12.x).
func (v KernelVersion) sameLine(w KernelVersion) bool {
	return v.Major == w.Major && v.Minor == w.Minor
}

// lineBefore reports whether v's line (major.minor) comes before w's.
func (v KernelVersion) lineBefore(w KernelVersion) bool {
	return v.Major < w.Major || v.Major == w.Major && v.Minor < w.Minor
}

// TCPAOSince is the first mainline line with TCP-AO (Linux 6.7).
var TCPAOSince = KernelVersion{Major: 6, Minor: 7}

// HasTCPAO reports whether upstream Linux of v's line has TCP-AO (6.7 on,
// its release candidates included). A kernel older by its version that
// has TCP-AO all the same is a vendor backport, whose version says
// nothing about which fixes it carries.
func (v KernelVersion) HasTCPAO() bool { return !v.lineBefore(TCPAOSince) }

// Errors of KernelDefects.
var (
	// ErrKernelRelease: no version could be read from the release string.
	ErrKernelRelease = errors.New("tcpao: kernel release not understood")
	// ErrKernelPredatesTCPAO: the version is older than TCP-AO upstream;
	// if the kernel has TCP-AO, it is a backport the table cannot place.
	ErrKernelPredatesTCPAO = errors.New("tcpao: kernel version predates TCP-AO upstream (6.7)")
)

// ParseKernelRelease reads the upstream version at the start of a release
// string as uname -r gives it: "6.12.94+deb13-amd64", "7.3.4+bpo-amd64",
// "6.12.117-cloud-amd64", "6.18.0-rc5", "6.18-rc5-amd64", "7.2.13-1". What
// follows the version (a distribution's suffix) is ignored, except "-rcN"
// right after it. The patch level defaults to 0 ("6.18-rc5").
func ParseKernelRelease(release string) (KernelVersion, error) {
	bad := func() (KernelVersion, error) { return KernelVersion{}, fmt.Errorf("%w: %q", ErrKernelRelease, release) }
	var nums [3]int
	rest := release
	n := 0
	for n < 3 {
		i := 0
		for i < len(rest) && i < 6 && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			return bad() // no digits, or a number of more than 6
		}
		nums[n], _ = strconv.Atoi(rest[:i])
		rest = rest[i:]
		n++
		if n == 3 || !strings.HasPrefix(rest, ".") {
			break
		}
		rest = rest[1:]
	}
	if n < 2 {
		return bad()
	}
	v := KernelVersion{Major: nums[0], Minor: nums[1], Patch: nums[2]}
	if r, ok := strings.CutPrefix(rest, "-rc"); ok {
		i := 0
		for i < len(r) && i < 4 && r[i] >= '0' && r[i] <= '9' {
			i++
		}
		if i == 0 {
			return bad()
		}
		v.RC, _ = strconv.Atoi(r[:i])
		rest = r[i:]
	}
	// A version runs into a suffix only through a separator: "6.12.94x" is
	// not 6.12.94.
	if rest != "" && !strings.ContainsRune("-+_~", rune(rest[0])) {
		return bad()
	}
	return v, nil
}

// Mitigation is what a user of this package does on a kernel with a defect.
type Mitigation uint

const (
	// SyncListenerDeletes: never set DelKey.Async; delete a listening
	// socket's keys synchronously. Each delete then waits for an RCU grace
	// period in the kernel (milliseconds where del_async returns at once),
	// so a rotation of many peers on one listener takes longer.
	SyncListenerDeletes Mitigation = 1 << iota

	// AllMitigations is every mitigation: the safe choice on a kernel the
	// table cannot place.
	AllMitigations = SyncListenerDeletes
)

// String names the mitigations, "none" when there are none.
func (m Mitigation) String() string {
	if m&SyncListenerDeletes != 0 {
		return "synchronous listener key deletes (no del_async)"
	}
	return "none"
}

// Defect is one known TCP-AO defect of the kernel.
type Defect struct {
	ID      string // "CVE-2026-53389"
	Summary string // one line
	// Since is the first affected line (its release candidates included).
	Since KernelVersion
	// FixedIn is the first fixed release of each stable line that received
	// the fix, in ascending order. A line from Since on, before Mainline,
	// that is not listed never received the fix (an end-of-life line).
	FixedIn []KernelVersion
	// Mainline is the first upstream release with the fix: it and every
	// later release are fixed. Its own release candidates are counted as
	// affected, since which one took the fix is not recorded.
	Mainline   KernelVersion
	Mitigation Mitigation
}

// Affects reports whether v has the defect.
func (d Defect) Affects(v KernelVersion) bool {
	if v.lineBefore(d.Since) || v.Compare(d.Mainline) >= 0 {
		return false
	}
	for _, f := range d.FixedIn {
		if v.sameLine(f) {
			return v.Compare(f) < 0
		}
	}
	return true
}

// Fixed spells the fixed releases: "6.12.95, 6.18.38, 7.1.3, 7.2 and later".
func (d Defect) Fixed() string {
	var parts []string
	for _, f := range d.FixedIn {
		parts = append(parts, f.String())
	}
	parts = append(parts, fmt.Sprintf("%d.%d and later", d.Mainline.Major, d.Mainline.Minor))
	return strings.Join(parts, ", ")
}

// String is the defect in one line: id, summary and fixed releases.
func (d Defect) String() string {
	return fmt.Sprintf("%s (%s; fixed in %s)", d.ID, d.Summary, d.Fixed())
}

// knownDefects is the table. Invariant: each entry's FixedIn is ascending
// and every release in it is of a line from Since on, before Mainline.
var knownDefects = []Defect{
	{
		ID:         "CVE-2026-53389",
		Summary:    "use-after-free of a key in the del_async path on a listener",
		Since:      TCPAOSince,
		FixedIn:    []KernelVersion{{Major: 6, Minor: 12, Patch: 95}, {Major: 6, Minor: 18, Patch: 38}, {Major: 7, Minor: 1, Patch: 3}},
		Mainline:   KernelVersion{Major: 7, Minor: 2},
		Mitigation: SyncListenerDeletes,
	},
}

// KnownDefects returns a copy of the table of known TCP-AO defects.
func KnownDefects() []Defect {
	out := slices.Clone(knownDefects)
	for i := range out {
		out[i].FixedIn = slices.Clone(out[i].FixedIn)
	}
	return out
}

// DefectsOf returns the known defects that affect v, in table order (nil:
// none known).
func DefectsOf(v KernelVersion) []Defect {
	var out []Defect
	for _, d := range KnownDefects() {
		if d.Affects(v) {
			out = append(out, d)
		}
	}
	return out
}

// KernelDefects reads release (uname -r) and returns its version and the
// known defects that affect it. An unparsable release is ErrKernelRelease;
// a version before TCP-AO upstream is ErrKernelPredatesTCPAO (with the
// version). In both cases the table cannot vouch for the kernel, and a
// caller running on it should apply AllMitigations.
func KernelDefects(release string) (KernelVersion, []Defect, error) {
	v, err := ParseKernelRelease(release)
	if err != nil {
		return v, nil, err
	}
	if !v.HasTCPAO() {
		return v, nil, fmt.Errorf("%w: %q is %s", ErrKernelPredatesTCPAO, release, v)
	}
	return v, DefectsOf(v), nil
}

// Mitigations is the union of the defects' mitigations.
func Mitigations(ds []Defect) Mitigation {
	var m Mitigation
	for _, d := range ds {
		m |= d.Mitigation
	}
	return m
}

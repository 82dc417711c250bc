package tcpao_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/tcpao"
)

// TestParseKernelRelease: the upstream version at the start of uname -r as
// distributions spell it, and the strings that are not a version.
func TestParseKernelRelease(t *testing.T) {
	v := func(major, minor, patch, rc int) tcpao.KernelVersion {
		return tcpao.KernelVersion{Major: major, Minor: minor, Patch: patch, RC: rc}
	}
	cases := []struct {
		release string
		want    tcpao.KernelVersion
		bad     bool
	}{
		{release: "6.12.94+deb13-amd64", want: v(6, 12, 94, 0)},
		{release: "7.3.4+bpo-amd64", want: v(7, 3, 4, 0)},
		{release: "6.12.117-cloud-amd64", want: v(6, 12, 117, 0)},
		{release: "6.18.0-rc5", want: v(6, 18, 0, 5)},
		{release: "6.18-rc5-amd64", want: v(6, 18, 0, 5)},
		{release: "6.12.95-rc1", want: v(6, 12, 95, 1)},
		{release: "7.2.13-1", want: v(7, 2, 13, 0)},
		{release: "6.8.0-51-generic", want: v(6, 8, 0, 0)},
		{release: "6.12.57", want: v(6, 12, 57, 0)},
		{release: "6.7", want: v(6, 7, 0, 0)},
		{release: "5.14.0-427.13.1.el9_4.x86_64", want: v(5, 14, 0, 0)},
		{release: "6.1.0-rc", bad: true},
		{release: "", bad: true},
		{release: "linux", bad: true},
		{release: "6", bad: true},
		{release: "6.", bad: true},
		{release: "6.x.1", bad: true},
		{release: "v6.12.1", bad: true},
		{release: "6.12.94x", bad: true},
		{release: "6.12.94.1", bad: true},
		{release: "6.1234567.1", bad: true},
	}
	for _, c := range cases {
		t.Run(c.release, func(t *testing.T) {
			got, err := tcpao.ParseKernelRelease(c.release)
			if c.bad {
				if !errors.Is(err, tcpao.ErrKernelRelease) {
					t.Fatalf("ParseKernelRelease(%q) = %v, %v; want ErrKernelRelease", c.release, got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("ParseKernelRelease(%q) = %v, %v; want %v", c.release, got, err, c.want)
			}
		})
	}
}

// TestKernelVersionCompare: a release candidate comes before its release
// and after the previous one's; numbers compare as numbers, not text.
func TestKernelVersionCompare(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"6.12.94", "6.12.95", -1},
		{"6.12.95", "6.12.95", 0},
		{"6.12.100", "6.12.95", 1},
		{"6.18.0-rc5", "6.18.0", -1},
		{"6.18.0-rc5", "6.18.0-rc10", -1},
		{"6.18.0-rc1", "6.17.13", 1},
		{"7.0.0", "6.19.9", 1},
	}
	for _, c := range cases {
		a, errA := tcpao.ParseKernelRelease(c.a)
		b, errB := tcpao.ParseKernelRelease(c.b)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if got := a.Compare(b); got != c.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := b.Compare(a); got != -c.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

// TestKernelDefects: which releases CVE-2026-53389 affects, at every
// boundary the table draws: its introduction with TCP-AO (6.7), the last
// affected and first fixed release of each stable line that received the
// fix, the end-of-life lines that never did, the first mainline release
// with it (7.2; its release candidates are not vouched for), and kernels
// that predate TCP-AO or cannot be read.
func TestKernelDefects(t *testing.T) {
	const cve = "CVE-2026-53389"
	cases := []struct {
		release string
		want    []string // defect IDs
		err     error
	}{
		{release: "6.6.60", err: tcpao.ErrKernelPredatesTCPAO},
		{release: "5.14.0-427.13.1.el9_4.x86_64", err: tcpao.ErrKernelPredatesTCPAO},
		{release: "6.7.0-rc1", want: []string{cve}},
		{release: "6.7.0", want: []string{cve}},
		{release: "6.8.0-51-generic", want: []string{cve}},
		{release: "6.12.57", want: []string{cve}},
		{release: "6.12.94+deb13-amd64", want: []string{cve}},
		{release: "6.12.95-rc1", want: []string{cve}},
		{release: "6.12.95", want: nil},
		{release: "6.12.117-cloud-amd64", want: nil},
		{release: "6.13.12", want: []string{cve}},
		{release: "6.17.13", want: []string{cve}},
		{release: "6.18.0-rc5", want: []string{cve}},
		{release: "6.18.37", want: []string{cve}},
		{release: "6.18.38", want: nil},
		{release: "6.19.4", want: []string{cve}},
		{release: "7.0.9", want: []string{cve}},
		{release: "7.1.2", want: []string{cve}},
		{release: "7.1.3", want: nil},
		{release: "7.2.0-rc7", want: []string{cve}},
		{release: "7.2.0", want: nil},
		{release: "7.2.13-1", want: nil},
		{release: "7.3.4+bpo-amd64", want: nil},
		{release: "8.0.1", want: nil},
		{release: "", err: tcpao.ErrKernelRelease},
		{release: "unknown", err: tcpao.ErrKernelRelease},
	}
	for _, c := range cases {
		t.Run(c.release, func(t *testing.T) {
			_, ds, err := tcpao.KernelDefects(c.release)
			if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Fatalf("KernelDefects(%q) error %v, want %v", c.release, err, c.err)
			}
			var ids []string
			for _, d := range ds {
				ids = append(ids, d.ID)
			}
			if !slices.Equal(ids, c.want) {
				t.Fatalf("KernelDefects(%q) = %v, want %v", c.release, ids, c.want)
			}
			wantM := tcpao.Mitigation(0)
			if len(c.want) > 0 {
				wantM = tcpao.SyncListenerDeletes
			}
			if m := tcpao.Mitigations(ds); m != wantM {
				t.Fatalf("Mitigations = %v, want %v", m, wantM)
			}
		})
	}
}

// TestDefectTable: the invariants the table's entries must keep (each
// stable fix ascending, within the affected lines, before the mainline
// fix), a one-line text naming the id and every fixed release, and a copy
// that a caller cannot use to change the table.
func TestDefectTable(t *testing.T) {
	ds := tcpao.KnownDefects()
	if len(ds) == 0 {
		t.Fatal("no known defects")
	}
	for _, d := range ds {
		if d.ID == "" || d.Summary == "" || d.Mitigation == 0 {
			t.Errorf("%+v: id, summary and mitigation are required", d)
		}
		for i, f := range d.FixedIn {
			if i > 0 && d.FixedIn[i-1].Compare(f) >= 0 {
				t.Errorf("%s: FixedIn not ascending at %s", d.ID, f)
			}
			if !d.Affects(tcpao.KernelVersion{Major: f.Major, Minor: f.Minor}) || d.Affects(f) {
				t.Errorf("%s: %s must end an affected line", d.ID, f)
			}
			if f.Compare(d.Mainline) >= 0 {
				t.Errorf("%s: stable fix %s after the mainline fix %s", d.ID, f, d.Mainline)
			}
		}
		s := d.String()
		if !strings.Contains(s, d.ID) || strings.Contains(s, "\n") {
			t.Errorf("%q: want one line naming %s", s, d.ID)
		}
		for _, f := range d.FixedIn {
			if !strings.Contains(d.Fixed(), f.String()) {
				t.Errorf("Fixed() = %q does not name %s", d.Fixed(), f)
			}
		}
	}
	ds[0].FixedIn[0].Patch = 0
	ds[0].ID = "changed"
	if again := tcpao.KnownDefects(); again[0].ID == "changed" || again[0].FixedIn[0].Patch == 0 {
		t.Fatal("KnownDefects returned the table itself")
	}
}

package main

import (
	"path/filepath"
	"testing"
)

// TestFRRPathspaceNeverScans: for an FRR started with a pathspace, a
// missing pid file (its bgpd restarting under watchfrr) is an error, never
// the one process named bgpd that a scan finds: that is another
// instance's, whose sockets are not aokeyd's to key (a guest run found the
// chaos fleet's aokeyd keying another test's bgpd that way). Without a
// pathspace the scan still answers.
func TestFRRPathspaceNeverScans(t *testing.T) {
	dir := t.TempDir()
	other := startNamed(t, dir, "bgpd") // another instance's bgpd, as a scan sees it
	missing := filepath.Join(dir, "red", "bgpd.pid")
	for _, c := range []struct {
		name      string
		pathspace string
		wantScan  bool
	}{
		{"pathspace", "red", false},
		{"no pathspace", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			frr := "speaker:\n  type: frr\n  frr:\n    pid_file: " + missing + "\n    process_name: bgpd\n"
			if c.pathspace != "" {
				frr += "    pathspace: " + c.pathspace + "\n"
			}
			pid, err := processFinder(speakerConfig(t, frr).SpeakerProcess())()
			if c.wantScan {
				if err != nil || pid != other.Process.Pid {
					t.Errorf("pid %d, %v; want the one bgpd, %d", pid, err, other.Process.Pid)
				}
				return
			}
			if err == nil {
				t.Errorf("pid %d with the pid file missing: a scan found another instance's bgpd (%d)", pid, other.Process.Pid)
			}
		})
	}
}

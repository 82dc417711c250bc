package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
)

// TestBirdPIDNamesBirdsSetting: two processes by BIRD's process name and
// no pid file to tell them apart is an error that names the setting that
// does, speaker.bird.pid_file: never FRR's.
func TestBirdPIDNamesBirdsSetting(t *testing.T) {
	dir := t.TempDir()
	const name = "aokeyd-tbird" // a comm no other process has
	startNamed(t, dir, name)    // bird2 and bird3, say
	startNamed(t, dir, name)
	cfg := speakerConfig(t, "speaker:\n  type: bird\n  bird:\n    pid_file: "+filepath.Join(dir, "bird.pid")+
		"\n    process_name: "+name+"\n    control_socket: "+filepath.Join(dir, "bird.ctl")+"\n")
	pid, err := processFinder(cfg.SpeakerProcess())()
	if err == nil {
		t.Fatalf("pid %d from two processes named %s", pid, name)
	}
	if !strings.Contains(err.Error(), "speaker.bird.pid_file") || strings.Contains(err.Error(), "frr") {
		t.Errorf("error %q: want it to name speaker.bird.pid_file, and nothing of FRR's", err)
	}
}

// speakerConfig is a checked configuration with the speaker settings
// yaml (and a key file and policy that are never read).
func speakerConfig(t *testing.T, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse("", []byte("key_source:\n  type: file\n  file:\n    path: k.yaml\npolicy:\n  path: p.yaml\n"+yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/internal/config"
	goldenfile "github.com/aokeyd/aokeyd/internal/golden"
	"github.com/aokeyd/aokeyd/keystore"
	"github.com/aokeyd/aokeyd/policy"
)

// TestReferencePages: the reference pages of aokeyd.yaml, the policy and
// the key file are generated from their decoders' schemas (a setting
// without its entry, or an entry without its setting, panics in
// refdoc.MustBuild), docs/reference holds what the generator writes
// (-update rewrites it; a diff shows what changed), each page's example
// is a file its decoder accepts, and aokeyd man writes them as section 5
// pages that aokeyd(8) names under SEE ALSO. Issue 49 item 13: there were
// no reference pages, and the schema lists in the packages' doc comments
// had fallen behind (no speaker.bird, no fleet).
func TestReferencePages(t *testing.T) {
	pages := referencePages()
	for _, p := range pages {
		t.Run(p.Name, func(t *testing.T) {
			goldenfile.Check(t, filepath.Join("..", "..", "docs", "reference", p.Name+".md"), p.Markdown())
			if len(p.Settings) < 10 || p.Example == "" || p.Summary == "" {
				t.Errorf("%s: %d settings, example %d bytes", p.Name, len(p.Settings), len(p.Example))
			}
			for _, s := range p.Settings {
				if s.Type == "" || (s.Text == "" && !strings.Contains(s.Type, "|")) {
					t.Errorf("%s: %s has no type or no text: %+v", p.Name, s.Path, s.Doc)
				}
			}
		})
	}
	t.Run("examples decode", func(t *testing.T) {
		if _, err := config.Parse("aokeyd.yaml", []byte(config.Reference().Example)); err != nil {
			t.Errorf("aokeyd.yaml(5)'s example: %v", err)
		}
		if _, err := policy.Parse("policy.yaml", []byte(policy.Reference().Example)); err != nil {
			t.Errorf("aokeyd-policy.yaml(5)'s example: %v", err)
		}
		s, err := keystore.DecodeFile("keys.yaml", []byte(keystore.Reference().Example))
		if err != nil {
			t.Fatalf("aokeyd-keys.yaml(5)'s example: %v", err)
		}
		defer s.Zero()
		if r := s.Rejected(); len(r) > 0 {
			t.Errorf("aokeyd-keys.yaml(5)'s example: rejected %v", r)
		}
		if d := s.DemoKeys(); len(d) > 0 {
			t.Errorf("aokeyd-keys.yaml(5)'s example uses the public demo keys: %v", d)
		}
	})
	t.Run("man pages", func(t *testing.T) {
		dir := t.TempDir()
		var stderr bytes.Buffer
		if code := run([]string{"man", dir}, &bytes.Buffer{}, &stderr); code != 0 {
			t.Fatalf("aokeyd man: exit %d: %s", code, stderr.String())
		}
		top, err := os.ReadFile(filepath.Join(dir, "aokeyd.8"))
		if err != nil {
			t.Fatal(err)
		}
		see := string(top[strings.Index(string(top), ".SH SEE ALSO"):])
		for _, p := range pages {
			b, err := os.ReadFile(filepath.Join(dir, p.Name+".5"))
			if err != nil {
				t.Errorf("no section 5 page: %v", err)
				continue
			}
			if !strings.HasPrefix(string(b), `.\"`) || !strings.Contains(string(b), ".TH \""+strings.ToUpper(p.Name)+"\" 5 ") {
				t.Errorf("%s.5 has no section 5 header:\n%.300s", p.Name, b)
			}
			if !strings.Contains(see, `\fB`+p.Name+`(5)\fP`) {
				t.Errorf("aokeyd(8)'s SEE ALSO does not name %s(5):\n%s", p.Name, see)
			}
			// groff reads the page without a warning (when it is here).
			if groff, err := exec.LookPath("groff"); err == nil {
				cmd := exec.CommandContext(context.Background(), groff, "-man", "-Tutf8", "-ww", "-z", filepath.Join(dir, p.Name+".5"))
				if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
					t.Errorf("groff on %s.5: %v\n%s", p.Name, err, out)
				}
			}
		}
	})
}

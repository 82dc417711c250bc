package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManPages: aokeyd man writes aokeyd(8) and a page per subcommand,
// each naming every flag its FlagSet parses (the pages are generated from
// those FlagSets: a new flag is in its page).
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	var stderr bytes.Buffer
	if code := run([]string{"man", dir}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("aokeyd man: exit %d: %s", code, stderr.String())
	}
	dfs, _ := daemonFlags()
	ifs, _ := initFlags()
	efs, _ := execFlags()
	for page, fs := range map[string]*flag.FlagSet{"aokeyd.8": dfs, "aokeyd-init.8": ifs, "aokeyd-exec.8": efs, "aokeyd-version.8": flag.NewFlagSet("", 0)} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("%s: %v", page, err)
			continue
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(string(b), `\fB--`+f.Name+`\fP`) {
				t.Errorf("%s does not document -%s", page, f.Name)
			}
		})
	}
}

package refdoc

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

type dur int

func (d *dur) UnmarshalYAML(*yaml.Node) error { return nil }

type sample struct {
	Name  string  `yaml:"name"`
	Skip  string  `yaml:"-"`
	Wait  dur     `yaml:"wait"`
	Inner *inner  `yaml:"inner"`
	Items []inner `yaml:"items"`
	Tags  []string
}

type inner struct {
	On bool `yaml:"on"`
}

// TestFields: the paths of a schema's fields in declaration order, a
// mapping before its fields, a list's items as [], a type that decodes
// itself as one setting; their types named for a page.
func TestFields(t *testing.T) {
	got := Fields(reflect.TypeFor[sample]())
	want := []string{"name", "wait", "inner", "inner.on", "items", "items[].on", "tags"}
	if !slices.Equal(got, want) {
		t.Errorf("Fields = %q, want %q", got, want)
	}
	types := Types(reflect.TypeFor[sample]())
	for path, want := range map[string]string{"name": "string", "wait": "dur", "inner": "mapping", "inner.on": "true | false",
		"items": "list of mappings", "tags": "list of strings"} {
		if types[path] != want {
			t.Errorf("type of %s = %q, want %q", path, types[path], want)
		}
	}
}

// TestBuild: a setting without its Doc and a Doc without its setting are
// each named; a complete table builds in the schema's order.
func TestBuild(t *testing.T) {
	paths := []string{"a", "a.b", "c"}
	tests := []struct {
		name string
		docs map[string]Doc
		errs []string
	}{
		{"complete", map[string]Doc{"a": {}, "a.b": {}, "c": {}}, nil},
		{"a setting undocumented", map[string]Doc{"a": {}, "c": {}}, []string{"setting a.b is not documented"}},
		{"a documented setting gone", map[string]Doc{"a": {}, "a.b": {}, "c": {}, "d": {}}, []string{"documented setting d is not in the schema"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Build(paths, tc.docs)
			if len(tc.errs) == 0 {
				if err != nil || len(s) != 3 || s[1].Path != "a.b" {
					t.Errorf("Build = %v, %v", s, err)
				}
				return
			}
			for _, e := range tc.errs {
				if err == nil || !strings.Contains(err.Error(), e) {
					t.Errorf("error %v, want it to say %q", err, e)
				}
			}
		})
	}
}

// TestRender: both renderings carry every setting with its facts and the
// example; the man page escapes what roff would read as requests.
func TestRender(t *testing.T) {
	p := Page{Name: "x.yaml", Summary: "a file", Intro: "Para `one`.\n\n\tverbatim \\ line", SeeAlso: []string{"aokeyd(8)"},
		Settings: []Setting{{Path: "a.b", Doc: Doc{Type: "duration", Default: "30s", Required: "yes", Text: ".dot first", Example: "b: 1m"}}},
		Example:  "a:\n  b: 30s\n"}
	md := p.Markdown()
	for _, w := range []string{"# x.yaml(5): a file", "### `a.b`", "duration; default `30s`; required: yes", "Example: `b: 1m`", "```yaml\na:\n  b: 30s\n```", "aokeyd(8)"} {
		if !strings.Contains(md, w) {
			t.Errorf("Markdown lacks %q:\n%s", w, md)
		}
	}
	d := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	man := p.Man(&d, "aokeyd 1.0")
	for _, w := range []string{`.TH "X.YAML" 5 "Dec 2026" "aokeyd 1.0"`, "Para \\fBone\\fR.", "verbatim \\e line", ".B a.b\n", "\\&.dot first", ".BR aokeyd (8)"} {
		if !strings.Contains(man, w) {
			t.Errorf("Man lacks %q:\n%s", w, man)
		}
	}
}

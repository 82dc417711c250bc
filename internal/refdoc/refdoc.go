// Package refdoc builds the reference pages of the files aokeyd reads
// (aokeyd.yaml, the policy, the key file) from the one place each schema
// is defined: the settings are found in the decoder's own types (their
// yaml tags) or field lists, and each package documents them in a table
// keyed by the settings' paths, with defaults taken from the constants the
// decoder applies. Build refuses a setting without its entry and an entry
// without its setting, so a page cannot fall behind its decoder; the pages
// are rendered as Markdown (docs/reference) and as man pages (section 5).
package refdoc

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Doc documents one setting.
type Doc struct {
	// Type is what the setting takes ("duration", "file | vault", "list
	// of addresses"); "" derives it from the Go type.
	Type string
	// Default is the value a setting left out has, "" when there is none.
	Default string
	// Required says when the setting must be given ("yes", "with type
	// file"); "" when it is optional.
	Required string
	// Text says what the setting does: sentences, no markup but `code`.
	Text string
	// Example is a value, as written in the file.
	Example string
}

// Setting is one setting of a page: its path in the file and its Doc.
type Setting struct {
	// Path is the setting's YAML path: "key_source.refresh",
	// "peers[].vrf" (an item of a list), "chains.NAME.keys[].name" (a
	// mapping keyed by names).
	Path string
	Doc
}

// Page is the reference of one file.
type Page struct {
	// Name is the page's name, also the man page's ("aokeyd.yaml").
	Name string
	// Summary is the one-line description (the man page's NAME line).
	Summary string
	// Intro is the description before the settings: paragraphs separated
	// by blank lines; a paragraph whose lines are indented by a tab is
	// shown as is (an example).
	Intro string
	// Settings are the file's settings, in the order of the file.
	Settings []Setting
	// Example is a complete file.
	Example string
	// SeeAlso names other pages ("aokeyd(8)").
	SeeAlso []string
}

// Fields returns the YAML paths of the fields of the struct type t in
// declaration order, each mapping before its fields: nested structs as
// "a.b", a list of structs as "a[].b". A type with its own UnmarshalYAML
// (a duration, a lifetime) is one setting.
func Fields(t reflect.Type) []string {
	var out []string
	walkFields(t, func(path string, _ reflect.StructField) { out = append(out, path) })
	return out
}

// walkFields calls visit with each field of t's schema and its path, in
// the order of the struct's fields, depth first: Fields and Types read
// the schema the same way.
func walkFields(t reflect.Type, visit func(path string, f reflect.StructField)) {
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			visit(path, f)
			ft := deref(f.Type)
			if ft.Kind() == reflect.Slice && elemStruct(ft.Elem()) {
				walk(deref(ft.Elem()), path+"[]")
			} else if ft.Kind() == reflect.Struct && !leaf(ft) {
				walk(ft, path)
			}
		}
	}
	walk(deref(t), "")
}

var unmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// leaf reports whether t decodes itself (a setting, not a mapping of
// settings).
func leaf(t reflect.Type) bool {
	return t.Implements(unmarshaler) || reflect.PointerTo(t).Implements(unmarshaler)
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func elemStruct(t reflect.Type) bool {
	t = deref(t)
	return t.Kind() == reflect.Struct && !leaf(t)
}

// Build pairs each path with its Doc, in the order of paths. It fails,
// naming each, when a path has no Doc or a Doc names no path.
func Build(paths []string, docs map[string]Doc) ([]Setting, error) {
	var errs []error
	out := make([]Setting, 0, len(paths))
	for _, p := range paths {
		d, ok := docs[p]
		if !ok {
			errs = append(errs, fmt.Errorf("setting %s is not documented", p))
			continue
		}
		out = append(out, Setting{Path: p, Doc: d})
	}
	var extra []string
	for p := range docs {
		if !slices.Contains(paths, p) {
			extra = append(extra, p)
		}
	}
	slices.Sort(extra)
	for _, p := range extra {
		errs = append(errs, fmt.Errorf("documented setting %s is not in the schema", p))
	}
	return out, errors.Join(errs...)
}

// MustBuild is Build for a package's table, which its tests keep
// complete: it panics on a mismatch.
func MustBuild(paths []string, docs map[string]Doc) []Setting {
	s, err := Build(paths, docs)
	if err != nil {
		panic("refdoc: " + err.Error())
	}
	return s
}

// TypeOf names the Go type of a setting for a page: "string", "integer",
// "true | false", "list", "mapping", or the named type's own name in lower
// case ("duration").
func TypeOf(t reflect.Type) string {
	t = deref(t)
	if t.Name() != "" && t.PkgPath() != "" && leaf(t) {
		return strings.ToLower(t.Name())
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true | false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.String:
		return "string"
	case reflect.Slice:
		if elemStruct(t.Elem()) {
			return "list of mappings"
		}
		return "list of " + TypeOf(t.Elem()) + "s"
	case reflect.Struct:
		return "mapping"
	}
	return t.Kind().String()
}

// Types returns TypeOf each field of t by its path, as Fields finds them.
func Types(t reflect.Type) map[string]string {
	out := map[string]string{}
	walkFields(t, func(path string, f reflect.StructField) { out[path] = TypeOf(f.Type) })
	return out
}

// WithTypes fills each Setting's empty Type from types (Types).
func WithTypes(s []Setting, types map[string]string) []Setting {
	for i := range s {
		if s[i].Type == "" {
			s[i].Type = types[s[i].Path]
		}
	}
	return s
}

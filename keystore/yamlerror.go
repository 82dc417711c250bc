package keystore

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

var (
	yamlLineRE     = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlNotFoundRE = regexp.MustCompile(`^field (.*) not found in type (\S+)$`)
	yamlDupKeyRE   = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
	// yamlInputRE is text of the input that yaml.v3 or a custom
	// unmarshaler quotes in a message: a value ("cannot unmarshal !!str
	// `x`"), an anchor's name, a scalar.
	yamlInputRE = regexp.MustCompile("`[^`]*`|\"(?:[^\"\\\\]|\\\\.)*\"|'[^']*'")
	// yamlPunctRE is what yaml.v3's own syntax messages quote: one
	// indicator character ("did not find expected ',' or '}'", "could
	// not find expected ':'"). It is the grammar's, never the input's.
	yamlPunctRE = regexp.MustCompile(`^'[^A-Za-z0-9\s']'$`)
)

// hideInput replaces what m quotes of the input by "(not shown)" and
// keeps what yaml.v3's syntax messages quote of YAML's grammar.
func hideInput(m string) string {
	return yamlInputRE.ReplaceAllStringFunc(m, func(q string) string {
		if yamlPunctRE.MatchString(q) {
			return q
		}
		return "(not shown)"
	})
}

// YAMLSchema is what YAMLErrors knows of the decoder's target.
type YAMLSchema struct {
	// Types renders the decoder's Go type names ("config.Log") as the
	// names the operator knows ("log"); nil leaves them as they are.
	Types *strings.Replacer
	// Target is a value of the type decoded into: its yaml field names
	// are the allowed fields an unknown field's problem lists, and the
	// only mapping keys a problem may name. Nil: none is listed or named.
	Target any
	// Root is the document's node tree, for an unknown field's column and
	// the path of the mapping it is in; nil: the line only.
	Root *yaml.Node
	// HideValues leaves out what a message quotes of the input (a
	// value, an anchor's name): for a file whose values are never shown
	// (aokeyd's config, which names credentials' files and Vault).
	HideValues bool
	// HideKeyMaterial leaves out what a message quotes of the input
	// when it could be key material (Shown): for a file whose values are
	// names, addresses and times (the policy).
	HideKeyMaterial bool
}

// YAMLErrors turns an error from decoding file with yaml.v3 into one
// positioned FieldError per message it carries ("line 3: field foo not
// found in type config.Log"): the line it names, and the message wrapped in
// ErrUnknownField (a field the target type lacks, with KnownFields),
// ErrDuplicate (a mapping key given twice) or ErrSyntax (anything else).
//
// No mapping key of the input reaches a problem but the schema's own
// field names: an unknown field is named by its place (line, column, the
// path of its mapping) and the fields allowed there, and a duplicate key
// by its name only when that is a field name. A key that is not the
// schema's may be a secret pasted on the wrong line or written as a flow
// mapping. With HideValues, what a message quotes of the input (a value,
// an anchor) is left out too.
//
// A custom yaml.Unmarshaler may prefix its own "line N: " to the message;
// the innermost line wins.
func YAMLErrors(file string, err error, s YAMLSchema) FieldErrors {
	types := s.Types
	if types == nil {
		types = strings.NewReplacer()
	}
	fields := schemaFields(s.Target)
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	out := make(FieldErrors, 0, len(msgs))
	for _, m := range msgs {
		pos := Pos{File: file}
		for range 2 {
			m = strings.TrimPrefix(m, "yaml: ")
			sm := yamlLineRE.FindStringSubmatch(m)
			if sm == nil {
				break
			}
			pos.Line, _ = strconv.Atoi(sm[1])
			m = sm[2]
		}
		m = strings.TrimPrefix(m, "yaml: ")
		var err error
		field := ""
		switch sm := yamlNotFoundRE.FindStringSubmatch(m); {
		case sm != nil:
			var col int
			field, col = keyPlace(s.Root, pos.Line, sm[1])
			pos.Column = col
			err = fmt.Errorf("%w (its name is not shown) in %s", ErrUnknownField, types.Replace(sm[2]))
			if allowed := fields[sm[2]]; len(allowed) > 0 {
				err = fmt.Errorf("%w; allowed: %s", err, strings.Join(allowed, ", "))
			}
		case yamlDupKeyRE.MatchString(m):
			dm := yamlDupKeyRE.FindStringSubmatch(m)
			if isField(fields, dm[1]) {
				err = fmt.Errorf("%w: %s", ErrDuplicate, m)
			} else {
				err = fmt.Errorf("%w: a mapping key (not shown: not a field name) already defined at line %s", ErrDuplicate, dm[2])
			}
		default:
			m = types.Replace(m)
			switch {
			case s.HideValues:
				m = hideInput(m)
			case s.HideKeyMaterial:
				m = yamlInputRE.ReplaceAllStringFunc(m, func(q string) string {
					if Shown(q[1:len(q)-1]) == "(not shown)" {
						return "(not shown)"
					}
					return q
				})
			}
			err = fmt.Errorf("%w: %s", ErrSyntax, m)
		}
		out = append(out, &FieldError{Pos: pos, Field: field, Err: err})
	}
	return out
}

// keyPlace finds the mapping key name on line in root and returns the
// path of the mapping it is in ("peers[2]", "" at the top) and its column;
// "" and 0 when it is not found. The path is made of the keys above it,
// which the decoder knew (else it would have stopped there).
func keyPlace(root *yaml.Node, line int, name string) (string, int) {
	var walk func(n *yaml.Node, path string) (string, int, bool)
	walk = func(n *yaml.Node, path string) (string, int, bool) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p, col, ok := walk(c, path); ok {
					return p, col, true
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if p, col, ok := walk(c, fmt.Sprintf("%s[%d]", path, i)); ok {
					return p, col, true
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Line == line && k.Value == name {
					return path, k.Column, true
				}
				sub := k.Value
				if path != "" {
					sub = path + "." + k.Value
				}
				if p, col, ok := walk(v, sub); ok {
					return p, col, true
				}
			}
		}
		return "", 0, false
	}
	if root == nil {
		return "", 0
	}
	p, col, _ := walk(root, "")
	return p, col
}

// schemaFields maps each struct type reachable from target, by its Go
// name as yaml.v3's messages print it ("config.Log"), to its yaml field
// names in declaration order.
func schemaFields(target any) map[string][]string {
	out := map[string][]string{}
	if target == nil {
		return out
	}
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		if _, seen := out[t.String()]; seen {
			return
		}
		out[t.String()] = nil
		var names []string
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if strings.Contains(opts, "inline") {
				visit(f.Type)
				names = append(names, out[f.Type.String()]...)
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			names = append(names, name)
			visit(f.Type)
		}
		out[t.String()] = names
	}
	visit(reflect.TypeOf(target))
	return out
}

// isField reports whether name is a field of any type of the schema.
func isField(fields map[string][]string, name string) bool {
	for _, fs := range fields {
		if slices.Contains(fs, name) {
			return true
		}
	}
	return false
}

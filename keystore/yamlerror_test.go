package keystore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aokeyd/aokeyd/keystore"
	"gopkg.in/yaml.v3"
)

// yamlTarget stands for a decoder's schema; lineValue is a custom
// unmarshaler that, like the config's and the policy's, names its line.
type yamlTarget struct {
	Name  string      `yaml:"name"`
	Count int         `yaml:"count"`
	Inner yamlInner   `yaml:"inner"`
	List  []yamlInner `yaml:"list"`
}

type yamlInner struct {
	V lineValue `yaml:"v"`
}

type lineValue struct{}

func (*lineValue) UnmarshalYAML(n *yaml.Node) error {
	return fmt.Errorf("line %d: bad value %q", n.Line, n.Value)
}

// TestYAMLErrors: each yaml.v3 message becomes a positioned problem that
// shows no text of the input but the schema's own field names. An unknown
// field names its line and column, the path of the mapping it is in and
// the fields allowed there, never its name; a wrong value's text is not
// shown. The names and values used to be quoted from yaml.v3's messages:
// `unknown field "PASSWORD" in top`, "cannot unmarshal !!str `TOKEN`".
func TestYAMLErrors(t *testing.T) {
	const sec = "aokeyd-test-secret-alpha-7QvX" // keystore/testdata/test-secrets.txt
	types := strings.NewReplacer("keystore_test.yamlTarget", "top", "keystore_test.yamlInner", "inner")
	type want struct {
		line, col int
		field     string
		sentinel  error
		msg       string
	}
	tests := []struct {
		name  string
		yaml  string
		err   error // instead of decoding yaml
		types *strings.Replacer
		want  []want
	}{
		{"syntax error names its line", "name: [\n", nil, types,
			[]want{{1, 0, "", keystore.ErrSyntax, "syntax error: did not find expected node content"}}},
		{"unknown fields, each with its place", "name: a\ncolour: red\ninner:\n  w: 1\n", nil, types, []want{
			{2, 1, "", keystore.ErrUnknownField, "unknown field (its name is not shown) in top; allowed: name, count, inner, list"},
			{4, 3, "inner", keystore.ErrUnknownField, "unknown field (its name is not shown) in inner; allowed: v"},
		}},
		{"a secret as a field name", "list:\n  - {" + sec + "}\n", nil, types, []want{
			{2, 6, "list[0]", keystore.ErrUnknownField, "unknown field (its name is not shown) in inner; allowed: v"},
		}},
		{"nil types leaves Go names", "colour: red\n", nil, nil,
			[]want{{1, 1, "", keystore.ErrUnknownField, "unknown field (its name is not shown) in keystore_test.yamlTarget; allowed: name, count, inner, list"}}},
		{"duplicate field", "name: a\nname: b\n", nil, types,
			[]want{{2, 0, "", keystore.ErrDuplicate, `duplicate: mapping key "name" already defined at line 1`}}},
		{"duplicate key that is no field", "inner:\n  " + sec + ": 1\n  " + sec + ": 1\n", nil, types,
			[]want{{3, 0, "", keystore.ErrDuplicate, "duplicate: a mapping key (not shown: not a field name) already defined at line 2"}}},
		{"wrong type, type renamed", "count: " + sec + "\n", nil, types,
			[]want{{1, 0, "", keystore.ErrSyntax, "syntax error: cannot unmarshal !!str (not shown) into int"}}},
		{"custom unmarshaler's own line wins", "inner:\n  v: x\n", nil, types,
			[]want{{2, 0, "", keystore.ErrSyntax, `syntax error: bad value (not shown)`}}},
		{"a whole document of the wrong kind", sec + "\n", nil, types,
			[]want{{1, 0, "", keystore.ErrSyntax, "syntax error: cannot unmarshal !!str (not shown) into top"}}},
		{"a line inside a line: the inner one wins", "", errors.New("yaml: line 3: line 5: bad value"), types,
			[]want{{5, 0, "", keystore.ErrSyntax, "syntax error: bad value"}}},
		{"no line at all", "", errors.New("yaml: control characters are not allowed"), types,
			[]want{{0, 0, "", keystore.ErrSyntax, "syntax error: control characters are not allowed"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err
			var root yaml.Node
			if err == nil {
				if yerr := yaml.Unmarshal([]byte(tt.yaml), &root); yerr != nil {
					err = yerr
				} else {
					dec := yaml.NewDecoder(strings.NewReader(tt.yaml))
					dec.KnownFields(true)
					var v yamlTarget
					if err = dec.Decode(&v); err == nil {
						t.Fatal("decoded without error")
					}
				}
			}
			got := keystore.YAMLErrors("f.yaml", err, keystore.YAMLSchema{Types: tt.types, Target: yamlTarget{}, Root: &root, HideValues: true})
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d: %v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if strings.Contains(g.Error(), sec) {
					t.Errorf("problem %d shows the input's text", i)
				}
				if g.File != "f.yaml" || g.Line != w.line || g.Column != w.col || g.Field != w.field {
					t.Errorf("problem %d at %v field %q, want f.yaml:%d:%d field %q", i, g.Pos, g.Field, w.line, w.col, w.field)
				}
				if !errors.Is(g, w.sentinel) {
					t.Errorf("problem %d = %v, want it to wrap %v", i, g, w.sentinel)
				}
				if g.Err.Error() != w.msg {
					t.Errorf("problem %d says %q, want %q", i, g.Err, w.msg)
				}
			}
		})
	}
}

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
	Name  string    `yaml:"name"`
	Count int       `yaml:"count"`
	Inner yamlInner `yaml:"inner"`
}

type yamlInner struct {
	V lineValue `yaml:"v"`
}

type lineValue struct{}

func (*lineValue) UnmarshalYAML(n *yaml.Node) error {
	return fmt.Errorf("line %d: bad value %q", n.Line, n.Value)
}

func TestYAMLErrors(t *testing.T) {
	types := strings.NewReplacer("keystore_test.yamlTarget", "top", "keystore_test.yamlInner", "inner")
	type want struct {
		line     int
		sentinel error
		msg      string
	}
	tests := []struct {
		name  string
		yaml  string
		err   error // instead of decoding yaml
		types *strings.Replacer
		want  []want
	}{
		{"syntax error names its line", "name: [\n", nil, types,
			[]want{{1, keystore.ErrSyntax, "syntax error: did not find expected node content"}}},
		{"unknown fields, each with its line", "name: a\ncolour: red\ninner:\n  w: 1\n", nil, types, []want{
			{2, keystore.ErrUnknownField, `unknown field "colour" in top`},
			{4, keystore.ErrUnknownField, `unknown field "w" in inner`},
		}},
		{"nil types leaves Go names", "colour: red\n", nil, nil,
			[]want{{1, keystore.ErrUnknownField, `unknown field "colour" in keystore_test.yamlTarget`}}},
		{"duplicate key", "name: a\nname: b\n", nil, types,
			[]want{{2, keystore.ErrDuplicate, `duplicate: mapping key "name" already defined at line 1`}}},
		{"wrong type, type renamed", "count: many\n", nil, types,
			[]want{{1, keystore.ErrSyntax, "syntax error: cannot unmarshal !!str `many` into int"}}},
		{"custom unmarshaler's own line wins", "inner:\n  v: x\n", nil, types,
			[]want{{2, keystore.ErrSyntax, `syntax error: bad value "x"`}}},
		{"a whole document of the wrong kind", "hello\n", nil, types,
			[]want{{1, keystore.ErrSyntax, "syntax error: cannot unmarshal !!str `hello` into top"}}},
		{"a line inside a line: the inner one wins", "", errors.New("yaml: line 3: line 5: bad value"), types,
			[]want{{5, keystore.ErrSyntax, "syntax error: bad value"}}},
		{"no line at all", "", errors.New("yaml: control characters are not allowed"), types,
			[]want{{0, keystore.ErrSyntax, "syntax error: control characters are not allowed"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err
			if err == nil {
				dec := yaml.NewDecoder(strings.NewReader(tt.yaml))
				dec.KnownFields(true)
				var v yamlTarget
				if err = dec.Decode(&v); err == nil {
					t.Fatal("decoded without error")
				}
			}
			got := keystore.YAMLErrors("f.yaml", err, tt.types)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems, want %d: %v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.File != "f.yaml" || g.Line != w.line || g.Column != 0 || g.Field != "" {
					t.Errorf("problem %d at %v field %q, want f.yaml:%d and no field", i, g.Pos, g.Field, w.line)
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

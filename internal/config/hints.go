package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/aokeyd/aokeyd/keystore"
	"gopkg.in/yaml.v3"
)

// What a problem of the config says to do where the field's own rule
// does not say it: the other files of aokeyd given in the config's place,
// and credentials written into it.

var (
	// ErrKeyFileAsConfig: the file named as aokeyd's configuration is a
	// key file (it has chains:).
	ErrKeyFileAsConfig = errors.New("this is a key file (it has chains:), not aokeyd's configuration")
	// ErrPolicyAsConfig: the file named as aokeyd's configuration is a
	// rotation policy (it has key_chains: or peers:).
	ErrPolicyAsConfig = errors.New("this is a rotation policy (it has key_chains: or peers:), not aokeyd's configuration")
)

// otherFile records a problem and reports true when the document is one
// of aokeyd's other files: it has none of the config's own fields and a
// field that only a key file or a policy has. Only field names of those
// schemas are compared; no key of the document is shown.
func (p *parser) otherFile() bool {
	top := keystore.FindNode(p.root, "")
	if top == nil || top.Kind != yaml.MappingNode {
		return false
	}
	own := schemaNames()
	var keys []*yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if slices.Contains(own, k.Value) {
			return false
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		pos := keystore.Pos{File: p.name(), Line: k.Line, Column: k.Column}
		switch k.Value {
		case "chains":
			p.errs = append(p.errs, &keystore.FieldError{Pos: pos, Err: ErrKeyFileAsConfig,
				Hint: "name aokeyd.yaml here (default " + DefaultPath + "); it names this file in key_source.file.path"})
			return true
		case "key_chains", "peers":
			p.errs = append(p.errs, &keystore.FieldError{Pos: pos, Err: ErrPolicyAsConfig,
				Hint: "name aokeyd.yaml here (default " + DefaultPath + "); it names this file in policy.path"})
			return true
		}
	}
	return false
}

// schemaNames are the config's top-level field names.
func schemaNames() []string {
	var out []string
	for f := range reflect.TypeFor[Config]().Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); f.IsExported() && name != "-" && name != "" {
			out = append(out, name)
		}
	}
	return out
}

// credentials are the fields a Vault credential is sometimes written as,
// by the mapping they would be in, with what to do instead. The name is
// compared, never shown.
var credentials = []struct {
	parent, name, hint string
}{
	{"key_source.vault", "token", tokenHint},
	{"key_source.vault.auth", "token", tokenHint},
	{"key_source.vault", "vault_token", tokenHint},
	{"key_source.vault.auth", "role_id", "name the file that holds the role ID in key_source.vault.auth.role_id_file"},
	{"key_source.vault.auth", "secret_id", "name the file that holds the secret ID in key_source.vault.auth.secret_id_file (Vault Agent can write it)"},
}

const tokenHint = "a Vault token is never written in aokeyd.yaml: write it to a file only aokeyd reads (mode 0600) and name that file in key_source.vault.auth.token_file, or give it to aokeyd as VAULT_TOKEN in its environment (the unit reads /etc/default/aokeyd)"

// credentialHint is what to do about the unknown field name in the
// mapping at parent when it is a credential's, "" otherwise.
func credentialHint(parent, name string) string {
	for _, c := range credentials {
		if c.parent == parent && c.name == name {
			return c.hint
		}
	}
	return ""
}

// keyAt is the name of the mapping key at line and col in the mapping at
// path, "" when there is none.
func keyAt(root *yaml.Node, path string, line, col int) string {
	n := keystore.FindNode(root, path)
	if n == nil || n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Line == line && k.Column == col {
			return k.Value
		}
	}
	return ""
}

// insecureHint is what to do about a key file that group or others may
// read: the file's mode, or the setting that accepts it.
func (c *Config) insecureHint(path string) string {
	return fmt.Sprintf("chmod 600 %s, or set key_source.file.allow_group_readable: true in %s to accept it (the file's group then reads the secrets)", path, c.name())
}

// name is the config's name in problems.
func (c *Config) name() string {
	if c.File == "" {
		return "config"
	}
	return c.File
}

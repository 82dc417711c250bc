package config

import _ "embed"

//go:embed default.yaml
var defaultConfig []byte

//go:embed demo-policy.yaml
var demoPolicy []byte

// DefaultConfig returns (a copy of) the embedded first-run configuration: a
// file key source at /etc/aokeyd/keys.yaml (seed it with
// keystore.WriteDefaultKeyFile: public demo keys) and the policy at
// /etc/aokeyd/policy.yaml (seed it with DemoPolicy).
func DefaultConfig() []byte { return append([]byte(nil), defaultConfig...) }

// DemoPolicy returns (a copy of) a policy that binds the demo peers of
// keystore.DefaultKeyFile (192.0.2.2 and 2001:db8::2) to its chain "demo".
func DemoPolicy() []byte { return append([]byte(nil), demoPolicy...) }

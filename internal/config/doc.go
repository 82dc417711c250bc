// Package config is aokeyd's daemon configuration: one YAML file that names
// the key source (a YAML key file or HashiCorp Vault), the rotation policy
// file, the BGP speaker whose sockets aokeyd manages (gobgpd through its gRPC
// address, or FRR's bgpd through its vty socket, and how to find its process), the control socket, the metrics listener,
// logging and kernel knobs.
//
// Decoding is strict: unknown fields, duplicate keys, wrong types and more
// than one YAML document are errors. Every problem names the file, line,
// column and field ("aokeyd.yaml:7:10: control.group: ...") and never the
// value there (a
// token pasted into the wrong field would be printed and logged), nor an
// unknown field's name; Parse reports all of them at
// once as a keystore.FieldErrors, the positioned-error list the key sources
// and the policy use too, wrapping keystore's shared sentinels (ErrSyntax,
// ErrUnknownField, ErrDuplicate, ErrMissingField, ErrInvalid). Relative
// paths in the file are resolved against the directory of the config file.
//
// # Schema
//
// Every setting, its default and an example are in aokeyd.yaml(5)
// (docs/reference/aokeyd.yaml.md), generated from Config's fields and the
// table of reference.go (Reference): a field without its entry fails the
// reference test, so the page cannot fall behind the decoder.
//
// Default returns an embedded configuration for first runs and demos: a key
// file (seeded with keystore.DefaultKeyFile, public demo keys) and a policy
// (DemoPolicy) under /etc/aokeyd.
package config

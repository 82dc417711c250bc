// Package keystore reads TCP-AO Master Key Tuples (MKTs) from a key source —
// HashiCorp Vault KV v2 (VaultSource) or a YAML file (FileSource) — into
// immutable snapshots, which are all the rest of aokeyd sees.
//
// Orientation: an MKT is written from the point of view of the router that
// loads it (SendID is what this router sends, RecvID what it expects); the
// peer holds the mirror image. CheckMirror and CheckMirrorSnapshots verify a
// pair. The layouts are documented in docs/keys.md.
//
// Validation: every MKT is validated on its own. A bad MKT becomes a
// *FieldError in its chain's Rejected list (naming source location, chain,
// key and field, never key bytes); the valid MKTs of the chain still load. A
// structural error (YAML/JSON syntax, unreadable chain) fails the whole read,
// also as a *FieldError. FieldError and its sentinels (ErrSyntax,
// ErrMissingField, ErrInvalid, ErrDuplicate, ErrUnknownField) are shared by
// every decoder of operator input: package policy and aokeyd's config
// report their problems with the same type, and turn yaml.v3's decoding
// errors into positioned FieldErrors with YAMLErrors.
//
// Failure handling: Source.Read returns an error on any failure, and Cache
// keeps the last good snapshot, exposing its age and the last error, so
// nothing is deleted because a source is down, sealed or denies access.
//
// Secrets: tcpao.Secret redacts itself. Every *Snapshot has one owner that
// calls Zero when dropping it (Source.Read returns a snapshot owned by the
// caller; Cache owns what it holds and hands out clones). Intermediate
// decoded strings (YAML scalars, JSON fields) cannot be wiped in Go; the
// raw file and HTTP body buffers are cleared after decoding.
package keystore

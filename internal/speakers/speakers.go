// Package speakers is the vocabulary a kind of BGP speaker is described
// in. It depends on no other part of aokeyd, so that every package that
// decides something by the speaker (the BGP adapters, the connect guard,
// the BIRD driver) can read it.
package speakers

// Port is BGP's port (RFC 4271): the port of a speaker's listener, and of
// the connects `aokeyd exec` keys. The one place it is written.
const Port = 179

// Command aoctl is the operator's tool for aokeyd: it shows the TCP-AO state
// of every BGP peer, plans and starts key rotations, revokes compromised
// keys, and validates configurations. Run `aoctl --help` for the commands,
// their flags, examples and exit codes.
//
// aoctl talks to the daemon over its control socket (package control);
// `aoctl plan --config` and `aoctl validate` work without the daemon and
// without a TCP-AO kernel.
package main

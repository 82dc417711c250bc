// Package birdnative keeps the TCP-AO keys of a BIRD that keys its own
// sockets (speaker.type bird): one include file per neighbor in
// speaker.bird.keys_dir (FileName) holds the key block of its `protocol
// bgp`; each new file is checked with `bird -p`, all are written, BIRD is
// reconfigured once a pass (`birdc configure`), and every file is put back
// when BIRD refuses. BIRD's sockets are read from the kernel, never
// written, to see which key the peer sends with: a key leaves a file only
// once the peer was seen to move off it (planPeer: the rotator's planner
// and retire proof on the file as a socket, the never-strand rule here). A binding of a prefix never reaches the driver: BIRD's kind has
// no PrefixBindings capability, so the policy refuses it when loaded.
//
// The Driver runs its own loop (Run) beside internal/daemon's pass and
// serves the control API (control.Backend) and the fleet publisher;
// revocations go to the daemon's one record (internal/revocation). Making
// it an executor beneath the daemon's pass is issue 50 item 1
// (docs/wip/birdexec.md).
package birdnative

// Package birdnative is BIRD's executor (daemon.Executor) for a BIRD
// that keys its own sockets (speaker.type bird): one include file per
// neighbor in speaker.bird.keys_dir (FileName) holds the key block of its
// `protocol bgp`. The daemon's pass plans each neighbor's list with the
// rotator's planner and retire proof on the file read as a socket (the
// never-strand rule, the spin model's executor end) and submits it; the
// executor's Run checks every changed file with `bird -p` in one run,
// writes them, reconfigures BIRD once (`birdc configure`), puts every
// file back when BIRD refuses and backs off, and reads BIRD's sessions
// back from the kernel. BIRD's sockets are read, never written. A binding
// of a prefix never reaches it: BIRD's kind has no PrefixBindings
// capability, so the policy refuses it when loaded.
package birdnative

package rotator

import "github.com/aokeyd/aokeyd/internal/runstack"

// A run (Controller.run) steps its machine on a goroutine of its own, new
// for each run: a machine that waits holds none (runner). A new goroutine
// starts on the runtime's starting stack, and a step's deepest path is
// about 30 frames down (the read of a session in a borrow of the
// speaker's descriptor: the daemon's, bgp's and tcpao's layers, then the
// GET_KEYS answer decoded with an HMAC-SHA256 fingerprint per key). The
// stack grew there, two or three times a run, and each growth copied
// every frame on it, looking each one's pointer maps up: in the guest's
// fleet-wide roll of 1,024 peers, runtime.newstack was 1.13 of aokeyd's
// 10.45 CPU-seconds, 0.69 of them under the fingerprints' SHA-256.
//
// growRunStack grows the run's stack once, at its start, where it holds
// one frame: the runtime sizes the new stack for growRunStack's frame at
// once (16 KiB from its 2 to 8 KiB starting stacks), more than the
// step's deepest path takes, and the step then runs without a copy.
// It changes no behaviour: a stack the step outgrows grows as before.

// growRunStack grows the calling goroutine's stack (see above).
func growRunStack() { runstack.Grow() }

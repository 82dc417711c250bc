// Package runstack grows a new goroutine's stack once, at its start.
//
// A new goroutine starts on the runtime's starting stack (2 to 8 KiB).
// Where its work goes about 30 frames down (a read of a session in a
// borrow of the speaker's descriptor: the daemon's, bgp's and tcpao's
// layers, then the GET_KEYS answer decoded), the stack grew there two or
// three times, and each growth copied every frame on it, looking each
// one's pointer maps up: in the guest's fleet-wide roll of 1,024 peers,
// runtime.newstack was 1.13 of aokeyd's 10.45 CPU-seconds.
//
// Grow, called where the goroutine holds one frame, has the runtime size
// the new stack for Grow's frame at once (16 KiB), more than such a path
// takes, so the work then runs without a copy. It changes no behaviour: a
// stack the work outgrows grows as before.
package runstack

// pad is Grow's frame: with the runtime's guard and the frames below it,
// the stack it leaves is 16 KiB.
const pad = 8 << 10

// Grow grows the calling goroutine's stack (see the package comment). Its
// frame is the array, which keep keeps from being optimised away.
//
//go:noinline
func Grow() {
	var p [pad]byte
	keep(&p)
}

//go:noinline
func keep(*[pad]byte) {}

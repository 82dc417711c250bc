// Package rotatorkernel runs the rotation controller (package rotator)
// against the real TCP-AO kernel: two controllers roll the keys of a
// loopback connection with data flowing both ways (twenty rolls, a peer
// that never gets the new key, a peer that gets it late on a socket keyed
// for a prefix) and a listener's keys are synced in batches. The tests
// need the guest VM (kerneltest.Require) and drive rotator through its
// exported API only, so rotator's own test binary links neither this
// harness nor integration/lab (issue 50).
//
// Run: integration/vm/run.sh ./integration/rotatorkernel
package rotatorkernel

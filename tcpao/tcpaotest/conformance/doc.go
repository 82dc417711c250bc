// Package conformance is a table of Linux TCP-AO behaviours (modelled on the
// kernel's selftests key-management.c and connect.c) that runs unchanged
// against any Stack: the in-memory kernel of tcpaotest (MemStack, on every
// host) and real sockets over loopback (KernelStack, Linux with
// CONFIG_TCP_AO, i.e. the test VM). A case that passes on one and fails on
// the other is a bug in the in-memory kernel.
//
// Expected results are errno values compared with errors.Is, key lists as
// GET_KEYS reports them (in the kernel's order: newest first), INFO state,
// and counters compared as zero / non-zero / grown, never as exact packet
// counts (the real kernel's ACK timing is not part of the contract).
//
// The differential test (Differential, TestDifferential in the test VM)
// goes further than the table: seeded random sequences of operations run
// through both stacks side by side, every result and every socket's INFO and
// GET_KEYS compared after each step. A divergence it finds is fixed in the
// model and becomes a named case of the table (regress_cases.go).
//
// Usage from a test:
//
//	conformance.Run(t, func(t *testing.T) conformance.Stack { return conformance.NewMemStack() })
package conformance

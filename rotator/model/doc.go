// Package model holds the Promela models: migrate.pml (the TCP-MD5 to
// TCP-AO migration of internal/migrate, for the accepting side) and the
// roll protocol's (roll.pml: two
// aokeyd-managed ends of one session and their listeners under the
// kernel's RNext rules, with the old key's lifetime ending and in-place
// edits of it, whose rule is edit.pml's; with -DEXECEND its end 1 is a
// speaker keyed from aokeyd's file, as BIRD, whose retire rule,
// internal/daemon's execPlanner.plan, is exec.pml's) and its seeded mutants
// (mutant_*.pml), checked by
// spin through `make model` (integration/tools/model.sh: the model's
// searches, then every mutant, each of which must violate a property, and
// each property's mutant must be there). Its test checks that the model
// names the states and steps rotator exports. It has no Go API; rotator's replay tests run spin's traces
// against the real machine.
package model

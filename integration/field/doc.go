// Package field holds the field guest's scenario (scenario.sh, run by
// `make field` under systemd on Debian's own TCP-AO kernel) and the host
// test that ties it to the operator's guide: every step docs/operations.md
// marks is run by the scenario, and every step the scenario runs is in the
// guide.
package field

// Command aokeyd-bench runs aokeyd's scale benchmarks in the TCP-AO guest VM
// and renders their report on the host (see package bench and
// integration/tools/bench.sh, which `make bench` runs).
//
//	aokeyd-bench run -out DIR [-sizes 1024,4096,16384] [-reps 3,3,1] ...
//	aokeyd-bench render -in DIR/results.json -out REPORTDIR [-profile-top F] [-bench WHERE=F]...
package main

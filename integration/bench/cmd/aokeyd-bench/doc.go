// Command aokeyd-bench runs aokeyd's scale benchmarks in the TCP-AO guest VM
// and writes what they measured as results.json, with CPU profiles beside it
// (see package bench and integration/tools/bench.sh, which `make bench`
// runs). The report is drawn on the host by aokeyd-bench-report; this
// program does not link its plotting library, whose start-up heap would
// count in the RSS the daemon item measures.
//
//	aokeyd-bench run -out DIR [-sizes 1024,4096,16384] [-reps 7,4,2] ...
package main

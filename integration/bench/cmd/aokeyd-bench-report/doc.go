// Command aokeyd-bench-report draws the report of a `make bench` run on the
// host from the results.json aokeyd-bench wrote in the guest: report.txt
// (the table, also printed), report.png (the chart, package chart),
// report.tsv (every figure as tab-separated values: item, n, series, value,
// unit, runs) and results.json with the host's additions (the go test
// -bench outputs and profile tops it was given).
//
//	aokeyd-bench-report -in DIR/results.json -out REPORTDIR [-profile-top F] [-pass-top F] [-steady-top F] [-bench WHERE=F]...
package main

// Command durationsecs prints a Go duration ("60m", "1h30m") in whole
// seconds, for the make targets' shell arithmetic.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: durationsecs DURATION")
		os.Exit(2)
	}
	d, err := time.ParseDuration(os.Args[1])
	if err != nil || d <= 0 {
		fmt.Fprintf(os.Stderr, "durationsecs: %q is not a positive Go duration (e.g. 60m, 90s)\n", os.Args[1])
		os.Exit(2)
	}
	fmt.Println(int(d.Seconds()))
}

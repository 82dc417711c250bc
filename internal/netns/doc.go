// Package netns runs a function in the network namespace of another
// process: the one place aokeyd enters a namespace (the sock_diag queries
// of the speaker's sockets, the optmem_max sysctl of its namespace).
package netns

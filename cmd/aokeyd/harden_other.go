//go:build !linux

package main

// harden does nothing off Linux, where aokeyd refuses to start anyway
// (tcpao.Probe fails closed).
func harden() error { return nil }

// Package refit remakes a map at the size it holds now.
//
// A Go map keeps the buckets of the largest size it ever had: a map that
// grew to a fleet (every listener key down at the start, every peer down
// before its session came up) and then emptied for the most part holds
// the memory of its peak. Its owners remake it when few enough entries
// are left (rotator's down watch, the daemon's verify bases).
package refit

// Map is a new map holding m's entries, made for len(m) of them. Not
// maps.Clone, which may copy m's bucket size too.
func Map[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

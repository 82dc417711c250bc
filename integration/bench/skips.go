package bench

// Skips lists the daemon benchmarks (the emergency revoke, the daemon's
// memory and idle pass) that r does not hold, and why.
func Skips(r *Results) []Skip {
	out := append([]Skip(nil), r.DaemonErrors...)
	if r.Revoke == nil && len(r.DaemonErrors) == 0 {
		out = append(out, Skip{Item: "3. Emergency revoke across 1,000 peers", Why: "not run (aokeyd-bench run -revoke-peers 0)"})
	}
	if r.Daemon == nil && len(r.DaemonErrors) == 0 {
		out = append(out, Skip{Item: "5. Daemon RSS and idle reconcile pass", Why: "not run (aokeyd-bench run -daemon-peers 0)"})
	}
	return out
}

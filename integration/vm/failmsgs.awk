# failmsgs.awk: from a go test -v log, each failed test's own last
# messages (what its t.Log/t.Error calls printed: a "file.go:N:" line and
# its continuation lines), so that a CI log's tail says why a test failed
# even when its cleanups printed pages after the failure. Lines that
# point at a lab.Dump file are left out: run.sh prints those files above.
# Usage: awk -v keep=MESSAGES -v lines=LINES -f failmsgs.awk console.log
# (defaults 4 and 30: the last keep messages of each failed test, each cut
# to its first lines lines).
BEGIN {
	if (keep == "") keep = 4
	if (lines == "") lines = 30
}
/^=== (RUN|CONT|NAME|PAUSE)  / { cur = $3; inmsg = 0; next }
/^ *--- FAIL: / {
	name = $3
	if (!(name in failed)) { failed[name] = 1; order[++nf] = name }
	inmsg = 0
	next
}
/printed after the run's verdicts/ { inmsg = 0; next }
/^    [^ ].*\.go:[0-9]+: / {
	if (cur == "") next
	m = ++cnt[cur]
	msg[cur, m] = $0
	nl[cur, m] = 1
	if (m > keep) { delete msg[cur, m - keep]; delete nl[cur, m - keep] }
	inmsg = 1
	next
}
/^        / && inmsg {
	m = cnt[cur]
	if (nl[cur, m] < lines) msg[cur, m] = msg[cur, m] "\n" $0
	else if (nl[cur, m] == lines) msg[cur, m] = msg[cur, m] "\n        [...]"
	nl[cur, m]++
	next
}
{ inmsg = 0 }
END {
	for (i = 1; i <= nf; i++) {
		name = order[i]
		if (!cnt[name]) continue # a parent whose subtest failed
		print "--- " name ": its last messages:"
		s = cnt[name] - keep + 1
		if (s < 1) s = 1
		for (j = s; j <= cnt[name]; j++) print msg[name, j]
	}
}

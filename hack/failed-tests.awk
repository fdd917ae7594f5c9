# Prints the whole `go test -v` output of every failed top-level test, so a
# CI log that only shows the filtered summary still says why a test failed.
# Usage: awk -f hack/failed-tests.awk .cache/e2e.log
#        awk -v brief=1 -f hack/failed-tests.awk .cache/e2e.log
# With brief=1 it prints, for each failed test, only the failed subtests and
# the last 30 lines that a test wrote itself (file:line), less the commands
# that succeeded: short enough to close the run, where a CI log's tail shows.
/^=== (RUN|CONT|NAME) / {
	split($3, parts, "/")
	cur = parts[1]
}
{
	if (cur == "") next
	if (!brief) { buf[cur] = buf[cur] $0 "\n" }
	else if ($0 ~ /^[ \t]+[A-Za-z0-9_]+_test\.go:[0-9]+:/ && $0 !~ /→ exit 0/) {
		n[cur]++
		line[cur, n[cur]] = $0
	}
}
/^[ \t]*--- FAIL: / {
	split($3, parts, "/")
	top = parts[1]
	if ($3 != top) { subs[top] = subs[top] $0 "\n" }
	if (!(top in failed)) { failed[top] = 1; order[++nf] = top }
}
END {
	for (i = 1; i <= nf; i++) {
		name = order[i]
		if (!brief) { printf "\n##### output of failed test %s #####\n%s", name, buf[name]; continue }
		printf "\n##### %s failed #####\n%s", name, subs[name]
		from = n[name] > 30 ? n[name] - 29 : 1
		for (k = from; k <= n[name]; k++) print line[name, k]
	}
}

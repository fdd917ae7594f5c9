# Prints the whole `go test -v` output of every failed top-level test, so a
# CI log that only shows the filtered summary still says why a test failed.
# Usage: awk -f hack/failed-tests.awk .cache/e2e.log
/^=== (RUN|CONT) / {
	split($3, parts, "/")
	cur = parts[1]
}
{ if (cur != "") buf[cur] = buf[cur] $0 "\n" }
/^--- FAIL: [^\/ ]+ / {
	name = $3
	if (!(name in printed)) {
		printf "\n##### output of failed test %s #####\n%s", name, buf[name]
		printed[name] = 1
	}
}

#!/usr/bin/env bash
# The tests that need the cluster, as make test-e2e runs them (the cluster
# is up; make test-e2e starts it). Two lanes run side by side:
#   e2e:         the Go e2e package (42-45 min on 2026-11-30);
#   integration: the Go integration and framework packages, then the
#                Python SDK's cluster tests, then mpijob.kfp's.
# Then, alone, the tests that stop mpijob-manager (while it is down no MPI
# job can be created) or take away what others use (MANAGER_DOWN_TESTS),
# and Kubeflow's TrainerClient's (it reads every job of team-a). A Go test
# that failed is run once more, alone (again, below).
# Each lane streams the lines that say how it goes, and keeps its whole
# `go test -v` output in its own file (hack/failed-tests.awk reads a test's
# lines by the test's name, which two streams in one file would mix);
# .cache/e2e.log is all of them, in order, at the end.
#
# Needs: GO, VENV, KFP_VENV, E2E_TIMEOUT, MANAGER_DOWN_TESTS; E2E_PARALLEL
# (4) is how many tests of a package run at once.
set -u
cd "$(dirname "$0")/.."
mkdir -p .cache
: "${GO:=go}" "${E2E_TIMEOUT:=75m}"
: "${VENV:?}" "${KFP_VENV:?}" "${MANAGER_DOWN_TESTS:?}"
# Tests at a time in each package: most wait on the cluster, and the
# CPU-heavy ones take turns anyway (framework.HeavyCPU), so more than the
# two cores go test would allow keeps the light ones moving while a heavy
# one waits for its turn.
PARALLEL=${E2E_PARALLEL:-4}
progress='^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)'
start=$SECONDS

# gotest NAME ARGS...: go test -v, its whole output in .cache/e2e-NAME.log
# and its lines of progress on stdout, each after [NAME]; its exit status.
gotest() {
	local name=$1
	shift
	local log=.cache/e2e-$name.log
	: >"$log" # there before tail reads it
	"$GO" test -tags e2e -count=1 -timeout "$E2E_TIMEOUT" -v "$@" >"$log" 2>&1 &
	local pid=$!
	tail -n +1 --pid=$pid -f "$log" 2>/dev/null | grep --line-buffered -E "$progress" | sed -u "s/^/[$name] /"
	wait $pid
}

# pytest NAME VENV ARGS...: the SDK's tests with the pytest of VENV, each
# line after [NAME]; its exit status.
pytest() {
	local name=$1 venv=$2
	shift 2
	(cd sdk/python && "$venv/bin/pytest" -q -p no:cacheprovider -m cluster "$@") 2>&1 | sed -u "s/^/[$name] /"
	return "${PIPESTATUS[0]}"
}

# lane NAME COMMAND...: runs COMMAND, says when it ends and how long it
# took, and leaves its exit status in .cache/lane-NAME.rc.
lane() {
	local name=$1
	shift
	local t0=$SECONDS
	"$@"
	local rc=$?
	echo "$rc" >".cache/lane-$name.rc"
	echo "lane $name: exit $rc after $((SECONDS - t0)) s"
}

integration_lane() {
	local rc=0
	# One package at a time streams its lines as they come (go test
	# holds each package's output until it ends when it runs several).
	gotest framework ./test/framework || rc=1
	gotest integration -parallel "$PARALLEL" -skip "$MANAGER_DOWN_TESTS" ./test/integration || rc=1
	echo "[integration] the Python SDK's cluster tests"
	# Kubeflow's own TrainerClient lists every job of the namespace and
	# fails on one whose runtime is gone, which the Go tests' runtimes of
	# their own are for a moment: its tests run alone, at the end.
	local prc=0
	pytest sdk "$VENV" --ignore tests/test_kubeflow_sdk.py || prc=1
	echo "[integration] mpijob.kfp's cluster tests"
	pytest kfp "$KFP_VENV" tests/test_kfp.py || prc=1
	echo "$prc" >.cache/lane-python.rc
	[ $prc = 0 ] || rc=1
	return $rc
}

# again NAME PKG: a Go package's run that failed is judged again by its
# failed top-level tests run once more, alone, after the lanes: a test
# that fails under the lanes' load (two lanes of four tests each on two
# cores) and passes alone is printed as FLAKY with its first failure, and
# does not fail the run; one that fails again does. Only for at most
# MAX_AGAIN tests, and never for a package that panicked, timed out or did
# not build (no test to run again). Its exit status: 0 when all passed
# the second time.
MAX_AGAIN=${E2E_MAX_AGAIN:-3}
again() {
	local name=$1 pkg=$2 log=.cache/e2e-$1.log failed n
	failed=$(grep -E '^--- FAIL: Test' "$log" | awk '{print $3}' | sort -u | xargs)
	n=$(echo "$failed" | wc -w)
	if [ "$n" = 0 ] || [ "$n" -gt "$MAX_AGAIN" ] || grep -qE '^panic: |^FAIL	.*\[(build|setup) failed\]' "$log"; then
		echo "[$name] not run again: $n failed test(s) (at most $MAX_AGAIN are), or the package panicked or did not build"
		return 1
	fi
	echo "[$name] run again, alone: $failed"
	if gotest "again-$name" -run "^($(echo $failed | tr ' ' '|'))\$" "$pkg"; then
		echo "FLAKY: $failed failed in lane $name and passed alone; the first failure is printed below"
		flaky="$flaky $failed"
		return 0
	fi
	return 1
}

# has_failure LOG...: whether a Go test run's log shows a failure (a failed
# test or package, or a panic).
has_failure() { grep -qE '^(FAIL|panic: )' "$@"; }

rm -f .cache/lane-*.rc .cache/e2e-again-*.log
lane e2e gotest e2e -parallel "$PARALLEL" -skip "$MANAGER_DOWN_TESTS" ./test/e2e &
lane integration integration_lane &
wait
rc=0 flaky=""
for l in e2e integration; do
	[ "$(cat ".cache/lane-$l.rc" 2>/dev/null)" = 0 ] || rc=1
done
# The integration lane's exit status is its Go packages' and the SDK's:
# run again only when the Go packages are what failed.
if [ $rc != 0 ]; then
	rc=0
	has_failure .cache/e2e-e2e.log && { again e2e ./test/e2e || rc=1; }
	has_failure .cache/e2e-framework.log && { again framework ./test/framework || rc=1; }
	has_failure .cache/e2e-integration.log && { again integration ./test/integration || rc=1; }
	[ "$(cat .cache/lane-python.rc 2>/dev/null)" = 0 ] || { echo "[integration] the Python SDK's cluster tests failed (not run again)"; rc=1; }
	# A lane that failed with no failed test to name (killed, out of time).
	[ "$(cat .cache/lane-e2e.rc)" = 0 ] || has_failure .cache/e2e-e2e.log || rc=1
	[ "$(cat .cache/lane-integration.rc)" = 0 ] || has_failure .cache/e2e-framework.log .cache/e2e-integration.log || rc=1
fi

echo "alone: the tests that stop mpijob-manager"
t0=$SECONDS
gotest alone -run "$MANAGER_DOWN_TESTS" ./test/integration || again alone ./test/integration || rc=1
echo "alone: done after $((SECONDS - t0)) s"
echo "alone: Kubeflow's TrainerClient against mpijob's runtimes"
pytest kubeflow-sdk "$VENV" tests/test_kubeflow_sdk.py || rc=1

cat .cache/e2e-e2e.log .cache/e2e-framework.log .cache/e2e-integration.log .cache/e2e-alone.log .cache/e2e-again-*.log >.cache/e2e.log 2>/dev/null
if [ $rc != 0 ] || [ -n "$flaky" ]; then awk -f hack/failed-tests.awk .cache/e2e.log; fi
if [ -n "$flaky" ]; then echo "FLAKY (failed under the lanes' load, passed alone):$flaky"; fi
awk -v brief=1 -f hack/failed-tests.awk .cache/e2e.log
echo "the cluster's tests: exit $rc after $((SECONDS - start)) s"
exit $rc

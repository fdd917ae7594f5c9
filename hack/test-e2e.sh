#!/usr/bin/env bash
# The tests that need the cluster, as make test-e2e runs them (the cluster
# is up; make test-e2e starts it). Two lanes run side by side:
#   e2e:         the Go e2e package (42-45 min on 2026-11-30);
#   integration: the Go integration and framework packages, then the
#                Python SDK's cluster tests, then mpijob.kfp's.
# Then, alone, the tests that stop mpijob-manager (while it is down no MPI
# job can be created) or take away what others use (MANAGER_DOWN_TESTS),
# and Kubeflow's TrainerClient's (it reads every job of team-a).
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
	pytest sdk "$VENV" --ignore tests/test_kubeflow_sdk.py || rc=1
	echo "[integration] mpijob.kfp's cluster tests"
	pytest kfp "$KFP_VENV" tests/test_kfp.py || rc=1
	return $rc
}

rm -f .cache/lane-*.rc
lane e2e gotest e2e -parallel "$PARALLEL" -skip "$MANAGER_DOWN_TESTS" ./test/e2e &
lane integration integration_lane &
wait
rc=0
for l in e2e integration; do
	[ "$(cat ".cache/lane-$l.rc" 2>/dev/null)" = 0 ] || rc=1
done

echo "alone: the tests that stop mpijob-manager"
t0=$SECONDS
gotest alone -run "$MANAGER_DOWN_TESTS" ./test/integration || rc=1
echo "alone: done after $((SECONDS - t0)) s"
echo "alone: Kubeflow's TrainerClient against mpijob's runtimes"
pytest kubeflow-sdk "$VENV" tests/test_kubeflow_sdk.py || rc=1

cat .cache/e2e-e2e.log .cache/e2e-framework.log .cache/e2e-integration.log .cache/e2e-alone.log >.cache/e2e.log
if [ $rc != 0 ]; then awk -f hack/failed-tests.awk .cache/e2e.log; fi
awk -v brief=1 -f hack/failed-tests.awk .cache/e2e.log
echo "the cluster's tests: exit $rc after $((SECONDS - start)) s"
exit $rc

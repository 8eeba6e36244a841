#!/usr/bin/env bash
# `npm test`: installs what is missing, provisions Postgres, Redis and Temporal like `npm run up`,
# then runs the whole test suite against the real services, with lint and typecheck beside it.
. "$(dirname "$0")/lib.sh"
trap 'stop_checks; stop_started' EXIT
trap 'exit 130' INT TERM

# The checks (lint, format, READMEs, import boundaries, typecheck) run in the background beside the
# provisioning and the suite, at a lower CPU priority: most of the suite waits on Postgres, Redis,
# Temporal and timers, so the checks use CPU time the suite leaves idle instead of running first
# (about 2 minutes of CPU on a 2-core machine). Each one's output is kept and shown after the suite's;
# any failure fails the run. Their caches are in .data/cache (git-ignored): a clean clone checks
# everything, a later run only what changed (each tool validates its cache by content).
CHECK_DIR=$(mktemp -d "${TMPDIR:-/tmp}/agent-api-platform-checks.XXXXXX")
CHECK_NAMES=()
CHECK_PIDS=()
CACHE="$ROOT/.data/cache"
# check NAME COMMAND...: starts one check (in a process group of its own where setsid exists, so an
# interrupted run stops all of it).
check() {
  local name=$1; shift
  local setsid=(); if command -v setsid >/dev/null; then setsid=(setsid --wait); fi
  ${setsid[@]+"${setsid[@]}"} bash -c 'started=$SECONDS; nice -n 10 "$@"; rc=$?; echo $((SECONDS - started)) >"$0.seconds"; exit $rc' \
    "$CHECK_DIR/$name" "$@" >"$CHECK_DIR/$name.out" 2>&1 </dev/null &
  CHECK_NAMES+=("$name")
  CHECK_PIDS+=("$!")
}
stop_checks() {
  local pid
  for pid in "${CHECK_PIDS[@]:-}"; do
    [ -n "$pid" ] && { kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; }
  done
  rm -rf "$CHECK_DIR"
}
# report_checks: waits for every check, names each with its time, prints the output of those that
# failed; fails when one did.
report_checks() {
  local i rc failed=0 summary=()
  [ "${#CHECK_PIDS[@]}" -gt 0 ] || return 0
  for i in "${!CHECK_PIDS[@]}"; do
    rc=0
    wait "${CHECK_PIDS[$i]}" || rc=$?
    local name=${CHECK_NAMES[$i]} seconds
    seconds=$(cat "$CHECK_DIR/$name.seconds" 2>/dev/null || echo '?')
    if [ "$rc" = 0 ]; then
      summary+=("$name ok (${seconds}s)")
    else
      failed=1
      summary+=("$name FAILED (exit $rc)")
      say test "$name FAILED (exit $rc):"
      cat "$CHECK_DIR/$name.out"
    fi
  done
  CHECK_PIDS=()
  say test "checks: ${summary[*]}"
  return $failed
}

ensure_node_modules
# TEST_SKIP_CHECKS=1 skips lint and typecheck (a quick run of a few test files while working; npm test and CI never set it).
if [ -z "${TEST_SKIP_CHECKS:-}" ]; then
  mkdir -p "$CACHE"
  say test "checks started beside the suite (lint, format, READMEs, import boundaries, typecheck); their results follow it"
  check lint npx eslint . --max-warnings=0 --cache --cache-strategy content --cache-location "$CACHE/eslint/"
  # `npm run format` fixes a failure here.
  check format npx prettier --check . --log-level warn --cache --cache-strategy content --cache-location "$CACHE/prettier"
  check readmes npx tsx scripts/check-readmes.ts
  # The rules are in .dependency-cruiser.cjs.
  check import-boundaries npx depcruise apps packages db workers workflows test bench scripts --config .dependency-cruiser.cjs \
    --output-type err
  # Edge, workers and tests; then the dashboard.
  check typecheck npx tsc --noEmit -p tsconfig.json --incremental --tsBuildInfoFile "$CACHE/tsc/main.tsbuildinfo"
  check typecheck-dashboard npx tsc --noEmit -p apps/dashboard/tsconfig.json --incremental --tsBuildInfoFile "$CACHE/tsc/dashboard.tsbuildinfo"
fi
ensure_venv
ensure_embedding_model
ensure_postgres
ensure_redis
ensure_temporal
ensure_chromium
ensure_promtool

# The suite gets a database of its own, recreated each run so it always matches the migrations.
# It is the template each test file clones its own database from (test/helpers/own-database.ts);
# clones a killed run left behind are dropped first.
TEST_DB=${TEST_DATABASE_NAME:-platform_test}
# Two runs on one machine with the same database name would drop each other's databases: the second waits.
exec 9>"${TMPDIR:-/tmp}/agent-api-platform-test-$TEST_DB.lock"
if ! flock -n 9; then
  say test "another test run uses database $TEST_DB; waiting for it (set TEST_DATABASE_NAME to run beside it)"
  flock 9
fi
for stale in $(psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -tAc "select datname from pg_database where datname ~ '^${TEST_DB}_f[0-9a-f]{8}\$'"); do
  psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -qc "drop database if exists \"$stale\" with (force)" >/dev/null
done
psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -qc "drop database if exists \"$TEST_DB\" with (force)" >/dev/null
ensure_database "$TEST_DB"
export DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/$TEST_DB"
export REDIS_URL=${REDIS_URL:-redis://$REDIS_HOST:$REDIS_PORT}
export TEMPORAL_ADDRESS="$TEMPORAL_HOST:$TEMPORAL_PORT"
export TEMPORAL_TEST_SERVER_PATH="$VENV/bin/temporal-test-server"
export NODE_ENV=test LOG_LEVEL=${LOG_LEVEL:-silent}
# Tests never share Redis keys or queues with a local `npm run up` (prefix "platform").
export REDIS_PREFIX=${TEST_REDIS_PREFIX:-platform-test}

say test "test suite (vitest) against $DATABASE_URL, $REDIS_URL, Temporal $TEMPORAL_ADDRESS"
suite=0
npx vitest run "$@" || suite=$?
checks=0
report_checks || checks=$?
# The suite's own exit code when it failed; else 1 when a check did.
[ "$suite" = 0 ] || exit "$suite"
exit "$checks"

#!/usr/bin/env bash
# `npm test`: installs what is missing, provisions Postgres, Redis and Temporal like `npm run up`,
# then runs lint, typecheck and the whole test suite against the real services.
. "$(dirname "$0")/lib.sh"
trap stop_started EXIT
trap 'exit 130' INT TERM

ensure_node_modules
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

# TEST_SKIP_CHECKS=1 skips lint and typecheck (a quick run of a few test files while working; npm test and CI never set it).
if [ -z "${TEST_SKIP_CHECKS:-}" ]; then
  say test "lint"
  npx eslint . --max-warnings=0
  say test "format (prettier --check; npm run format fixes it)"
  npx prettier --check . --log-level warn
  say test "folder READMEs name their files (scripts/check-readmes.ts)"
  npx tsx scripts/check-readmes.ts
  say test "import boundaries (dependency-cruiser: .dependency-cruiser.cjs)"
  npx depcruise apps packages db workers workflows test bench scripts --config .dependency-cruiser.cjs --output-type err
  say test "typecheck (edge, workers, tests; dashboard)"
  npx tsc --noEmit -p tsconfig.json
  npx tsc --noEmit -p apps/dashboard/tsconfig.json
fi
say test "test suite (vitest) against $DATABASE_URL, $REDIS_URL, Temporal $TEMPORAL_ADDRESS"
npx vitest run "$@"

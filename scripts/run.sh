#!/usr/bin/env bash
# Small entry points that provision only what they need: `npm run migrate`, `npm run services`,
# `npm run api` (operator CLI), `npm run demo` (against the stack `npm run up` runs).
. "$(dirname "$0")/lib.sh"
ensure_node_modules
# The same database `npm run up` uses (PGDATABASE from .env), unless DATABASE_URL says otherwise.
export DATABASE_URL=${DATABASE_URL:-postgres://$PGUSER@$PGHOST:$PGPORT/${PGDATABASE:-platform}}
case "${1:-}" in
  migrate)
    ensure_postgres
    ensure_database "${PGDATABASE:-platform}"
    exec npx tsx db/src/cli/migrate.ts ;;
  api)
    shift
    exec npx tsx apps/cli/api.ts "$@" ;;
  payments)
    shift
    exec npx tsx apps/cli/payments.ts "$@" ;;
  rotate-master-key)
    shift
    exec npx tsx apps/cli/rotate-master-key.ts "$@" ;;
  demo)
    shift
    exec npx tsx scripts/demo.ts "$@" ;;
  generate-client)
    shift
    ensure_postgres; ensure_redis
    exec npx tsx scripts/generate-client.ts "$@" ;;
  record-histories)
    # A scratch database of its own: the recorder makes accounts and sessions it does not clean up.
    shift
    ensure_venv; ensure_postgres; ensure_redis
    psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -qc 'drop database if exists "platform_histories" with (force)' >/dev/null
    ensure_database platform_histories
    export DATABASE_URL="postgres://$PGUSER@$PGHOST:$PGPORT/platform_histories"
    npx tsx db/src/cli/migrate.ts
    export TEMPORAL_TEST_SERVER_PATH="$VENV/bin/temporal-test-server"
    exec npx tsx scripts/record-histories.ts "$@" ;;
  services)
    ensure_postgres; ensure_redis; ensure_temporal
    say services "Postgres, Redis and Temporal are up; Temporal UI http://127.0.0.1:$TEMPORAL_UI_PORT (Ctrl-C stops what this started)"
    trap stop_started EXIT INT TERM
    [ ${#STARTED_PIDS[@]} -gt 0 ] && wait ;;
  *) die "usage: scripts/run.sh migrate|api|rotate-master-key|record-histories|demo|generate-client|services" ;;
esac

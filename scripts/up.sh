#!/usr/bin/env bash
# `npm run up`: installs what is missing, starts or checks Postgres, Redis and Temporal, applies
# migrations and seed data, then runs the edge and every worker in the foreground. Ctrl-C stops
# everything this script started (services that were already running are left alone).
. "$(dirname "$0")/lib.sh"

ensure_node_modules
ensure_venv
ensure_postgres
ensure_redis
ensure_temporal

DB_NAME=${PGDATABASE:-platform}
ensure_database "$DB_NAME"
export DATABASE_URL=${DATABASE_URL:-postgres://$PGUSER@$PGHOST:$PGPORT/$DB_NAME}
export REDIS_URL=${REDIS_URL:-redis://$REDIS_HOST:$REDIS_PORT}
export TEMPORAL_ADDRESS=${TEMPORAL_ADDRESS:-$TEMPORAL_HOST:$TEMPORAL_PORT}
export TEMPORAL_UI_URL=${TEMPORAL_UI_URL:-http://127.0.0.1:$TEMPORAL_UI_PORT}
export PORT=${PORT:-3000}
export PUBLIC_URL=${PUBLIC_URL:-http://127.0.0.1:$PORT}

say db "applying migrations to $DATABASE_URL"
npx tsx db/src/cli/migrate.ts
if [ -f db/src/cli/seed.ts ]; then
  say db "loading seed data"
  npx tsx db/src/cli/seed.ts
fi
if [ ! -f apps/dashboard/dist/index.html ]; then
  say build "building the dashboard"
  npm run --silent build:dashboard
fi

# Every child stays in the terminal's process group, so Ctrl-C reaches each of them directly and they
# shut down gracefully; when the script itself is signalled otherwise, cleanup signals all its
# descendants. Each process's lines are prefixed with its name (pino-pretty on a terminal).
run_process() { # run_process NAME COMMAND...
  local name=$1; shift
  ( "$@" 2>&1 | if [ -t 1 ]; then npx pino-pretty --colorize --singleLine --ignore pid,hostname; else cat; fi \
      | sed -u "s/^/[$name] /" ) &
}

descendants() { local child; for child in $(pgrep -P "$1"); do descendants "$child"; echo "$child"; done; }

cleanup() {
  trap - INT TERM EXIT
  say up "stopping everything this started"
  local pids; pids=$(descendants $$)
  [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 1 60); do pgrep -P $$ >/dev/null || break; sleep 0.25; done
  stop_started
}
trap cleanup INT TERM EXIT

run_process edge npx tsx apps/edge/src/server.ts
run_process temporal-worker npx tsx workers/temporal/main.ts
run_process queue-workers npx tsx workers/queues/main.ts

wait_for 60 "the edge on port $PORT (see the [edge] lines above)" port_open 127.0.0.1 "$PORT"
cat <<MSG

  API            $PUBLIC_URL/api/v1          (health: $PUBLIC_URL/api/v1/health)
  API reference  $PUBLIC_URL/api/v1/reference
  Dashboard      $PUBLIC_URL/
  Temporal UI    $TEMPORAL_UI_URL
  Queue board    $PUBLIC_URL/admin/queues   (operator login: OPERATOR_BASIC_AUTH)

  Ctrl-C stops everything this started.

MSG
wait

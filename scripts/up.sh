#!/usr/bin/env bash
# `npm run up`: installs what is missing, starts or checks Postgres, Redis and Temporal, applies
# migrations and seed data, then runs the edge, the directory ranking process and every worker in the foreground. Ctrl-C stops
# everything this script started (services that were already running are left alone).
. "$(dirname "$0")/lib.sh"

ensure_node_modules
ensure_venv
ensure_embedding_model
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
# A local stack may proxy to loopback upstreams (the demo's example upstream, your own test servers);
# production never does (the edge refuses ALLOW_PRIVATE_UPSTREAMS=true with NODE_ENV=production).
if [ "${NODE_ENV:-development}" != production ]; then export ALLOW_PRIVATE_UPSTREAMS=${ALLOW_PRIVATE_UPSTREAMS:-true}; fi

say db "applying migrations to $DATABASE_URL"
npx tsx db/src/cli/migrate.ts
if [ -f apps/cli/seed.ts ]; then
  say db "loading seed data"
  npx tsx apps/cli/seed.ts
fi
# Always a fresh production build (about a second): a build left from older sources, or a development
# one, is never what the edge serves.
say build "building the dashboard (production, precompressed)"
npm run --silent build:dashboard
# The edge runs from one bundle of its code (docs/decisions/edge-build.md; under a second), also always fresh.
say build "building the edge (dist/edge/server.mjs)"
npm run --silent build:edge

# Each process runs with its output piped through a log filter that prefixes its name (pino-pretty
# on a terminal). Ctrl-C (or SIGINT/SIGTERM to this script) signals the processes themselves first and
# waits for them to finish their work in flight, while their log filters stay up to print the
# shutdown; only then is anything left over terminated, and services this script started stopped.
PIDDIR=$(mktemp -d "${TMPDIR:-/tmp}/platform-up.XXXXXX")
PRETTY=false
[ -t 1 ] && PRETTY=true
run_process() { # run_process NAME COMMAND...
  local name=$1; shift
  # The log filters ignore Ctrl-C so they outlive the process and print its shutdown; the processes
  # themselves handle SIGINT (a graceful stop) whatever they inherit.
  ( trap '' INT
    bash -c 'echo $$ >"$0"; exec "$@"' "$PIDDIR/$name" "$@" 2>&1 \
      | if $PRETTY; then node_modules/.bin/pino-pretty --colorize --singleLine --ignore pid,hostname; else cat; fi \
      | sed -u "s/^/[$name] /" ) &
}

descendants() { local child; for child in $(pgrep -P "$1"); do descendants "$child"; echo "$child"; done; }

any_alive() { local pid; for pid in "$@"; do kill -0 "$pid" 2>/dev/null && return 0; done; return 1; }

cleanup() {
  trap - INT TERM EXIT
  say up "stopping everything this started"
  local main=() file pids
  for file in "$PIDDIR"/*; do [ -f "$file" ] && main+=("$(cat "$file")"); done
  if [ ${#main[@]} -gt 0 ]; then
    kill -TERM "${main[@]}" 2>/dev/null || true
    # The edge drains within 10 s, the workers within SHUTDOWN_GRACE_SECONDS.
    for _ in $(seq 1 $(( (${SHUTDOWN_GRACE_SECONDS:-20} + 5) * 4 ))); do any_alive "${main[@]}" || break; sleep 0.25; done
  fi
  pids=$(descendants $$)
  [ -n "$pids" ] && kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 1 20); do pgrep -P $$ >/dev/null || break; sleep 0.25; done
  rm -rf "$PIDDIR"
  stop_started
  say up "stopped"
}
trap cleanup INT TERM EXIT

# Mail goes to SMTP_URL; without one, to the development mail catcher started here (nothing leaves
# the machine: read the messages at http://127.0.0.1:1080/).
MAIL_NOTE="${SMTP_URL:-}"
if [ -z "${SMTP_URL:-}" ]; then
  export SMTP_URL=smtp://127.0.0.1:${MAIL_CATCHER_SMTP_PORT:-1025}
  run_process mail-catcher node_modules/.bin/tsx scripts/mail-catcher.ts
  MAIL_NOTE="http://127.0.0.1:${MAIL_CATCHER_HTTP_PORT:-1080}/   (development mail catcher: e-mail lands here, nothing is delivered)"
fi
# Search and discovery are ranked by one process the edges share (docs/decisions/directory-ranking-process.md).
export DIRECTORY_RANK_PORT=${DIRECTORY_RANK_PORT:-3090}
export DIRECTORY_RANK_URL=${DIRECTORY_RANK_URL:-http://127.0.0.1:$DIRECTORY_RANK_PORT}
run_process directory-ranker node_modules/.bin/tsx workers/directory/main.ts
# The edge runs from its bundle (built above) as node itself (no tsx loader or launcher process), with
# EDGE_NODE_OPTIONS as its NODE_OPTIONS, by default an 8 MB young generation (see .env.example; empty:
# Node's defaults).
run_process edge env NODE_OPTIONS="${EDGE_NODE_OPTIONS---max-semi-space-size=8}" node dist/edge/server.mjs
run_process temporal-worker node_modules/.bin/tsx workers/temporal/main.ts
run_process queue-workers node_modules/.bin/tsx workers/queues/main.ts

wait_for 60 "the edge on port $PORT (see the [edge] lines above)" port_open 127.0.0.1 "$PORT"
if [ -f apps/dashboard/dist/index.html ]; then DASHBOARD="$PUBLIC_URL/"
else DASHBOARD="(not built: apps/dashboard/dist is missing; run npm run build:dashboard)"; fi
if [ -n "${OPERATOR_BASIC_AUTH:-}" ]; then QUEUE_BOARD="$PUBLIC_URL/admin/queues   (operator login: OPERATOR_BASIC_AUTH)"
else QUEUE_BOARD="(off: set OPERATOR_BASIC_AUTH=user:password to serve it at $PUBLIC_URL/admin/queues)"; fi
PRIVATE_NOTE=""
[ "${ALLOW_PRIVATE_UPSTREAMS:-false}" = true ] && PRIVATE_NOTE="  The proxy may reach loopback/private upstreams (ALLOW_PRIVATE_UPSTREAMS=true, development only)."
cat <<MSG

  API            $PUBLIC_URL/api/v1          (health: $PUBLIC_URL/api/v1/health)
  API reference  $PUBLIC_URL/api/v1/reference
  Dashboard      $DASHBOARD
  Ranking        $DIRECTORY_RANK_URL   (the directory ranking process the edge asks; private)
  Temporal UI    $TEMPORAL_UI_URL
  Queue board    $QUEUE_BOARD
  Mail           $MAIL_NOTE
$PRIVATE_NOTE
  Try it:        npm run demo   (an agent's walk through the platform, against this stack)

  Ctrl-C stops everything this started.

MSG
wait

#!/usr/bin/env bash
# `npm run bench [-- scenario ...]`: provisions like `npm run up`, then runs every benchmark scenario
# (or the named ones) against a database of its own; each writes its section of docs/BENCHMARKS.md.
# `npm run soak` comes through here too (`soak`), for the same services and database.
. "$(dirname "$0")/lib.sh"
trap stop_started EXIT

ensure_node_modules
ensure_embedding_model
ensure_postgres
ensure_redis
ensure_temporal
ensure_database platform_bench

# The proxy scenario's nginx baseline: Debian's nginx binary, run by the scenario itself with a generated
# config as a foreground child; the package's own service is kept from starting (no daemon on port 80).
ensure_nginx() {
  command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] && return 0
  local policy=/usr/sbin/policy-rc.d created=
  if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1; fi
  apt_install nginx
  if [ -n "$created" ]; then rm -f "$policy"; fi
}
if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qx proxy; then ensure_nginx; fi
# The dashboard scenario drives Debian's Chromium, as the browser tests do.
if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qx dashboard; then ensure_chromium; fi
export DATABASE_URL=${BENCH_DATABASE_URL:-postgres://$PGUSER@$PGHOST:$PGPORT/platform_bench}
export TEMPORAL_ADDRESS="$TEMPORAL_HOST:$TEMPORAL_PORT"
export LOG_LEVEL=${LOG_LEVEL:-warn} NODE_ENV=development
export REDIS_PREFIX=${REDIS_PREFIX:-platform-bench}

npx tsx db/src/cli/migrate.ts
imported=$(psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d platform_bench -tAc "select count(*) from apis where source = 'apis.guru'")
if [ "$imported" = 0 ]; then
  say bench "importing the full APIs.guru catalog into platform_bench (search and discovery run over it)"
  npx tsx apps/cli/directory-import.ts
fi

# `npm run soak`: the edge's hour-long memory soak (scripts/soak.ts) on the same provisioned stack and database.
if [ "${1:-}" = soak ]; then
  say soak "the edge's memory under mixed load for ${SOAK_MINUTES:-60} minutes (scripts/soak.ts)"
  npx tsx scripts/soak.ts
  exit
fi

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
  for file in bench/*.ts; do scenarios+=("$(basename "$file" .ts)"); done
fi
for name in "${scenarios[@]}"; do
  [ -f "bench/$name.ts" ] || die "no scenario bench/$name.ts"
  say bench "scenario $name"
  npx tsx "bench/$name.ts"
done
say bench "done: see docs/BENCHMARKS.md"

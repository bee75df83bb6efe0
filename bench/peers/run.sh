#!/usr/bin/env bash
# Runs the peers benchmark end to end (see bench/peers/README.md):
#   1. installs what is missing (PostgreSQL, libpq, Redis, hiredis and the
#      project's build dependencies); quiet when everything is present;
#   2. builds idem-peers-bench into ${BUILD_DIR:-build};
#   3. starts, in a new temporary directory, a PostgreSQL server (initdb, run
#      as the postgres user) and two Redis servers (one with appendfsync
#      always, one without persistence), all listening on 127.0.0.1 only, on
#      unusual ports;
#   4. runs the benchmark (bounded: per-config time caps and an overall
#      timeout), then stops every server it started and removes the directory.
# Arguments go to idem-peers-bench, e.g. --json or --only=postgres,idem
# (see: idem-peers-bench --help). Ports: PEERS_PG_PORT (55432),
# PEERS_REDIS_DURABLE_PORT (56379), PEERS_REDIS_MEMORY_PORT (56380).
# Overall limit: PEERS_TIMEOUT seconds (1200).
set -euo pipefail
cd "$(dirname "$0")/../.."

pg_port=${PEERS_PG_PORT:-55432}
redis_durable_port=${PEERS_REDIS_DURABLE_PORT:-56379}
redis_memory_port=${PEERS_REDIS_MEMORY_PORT:-56380}
overall_timeout=${PEERS_TIMEOUT:-1200}
build_dir=${BUILD_DIR:-build}

log() { echo "peers: $*" >&2; }

# 1. Packages (scripts/install-deps.sh is idempotent and silent when done).
scripts/install-deps.sh postgresql libpq-dev redis-server libhiredis-dev

# 2. Build only the benchmark.
mkdir -p "$build_dir"
if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build_dir" --target idem-peers-bench -j"$(nproc)"; } \
     >"$build_dir/peers-build.log" 2>&1; then
  tail -n 40 "$build_dir/peers-build.log" >&2
  log "build FAILED (full log: $build_dir/peers-build.log)"
  exit 1
fi
bench="$build_dir/bench/peers/idem-peers-bench"

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pg_bin" ] || [ ! -x "$pg_bin/initdb" ]; then
  log "no PostgreSQL server binaries under /usr/lib/postgresql/*/bin"
  exit 1
fi
redis_server=$(command -v redis-server)
redis_cli=$(command -v redis-cli)

for port in "$pg_port" "$redis_durable_port" "$redis_memory_port"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    log "port $port on 127.0.0.1 is already in use; set PEERS_*_PORT"
    exit 1
  fi
done

# Servers must not run as root: use their system users when we are root.
as_user() {
  local user=$1
  shift
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$user" -- "$@"
  else
    "$@"
  fi
}
own() {
  if [ "$(id -u)" -eq 0 ]; then chown "$1:$1" "$2"; fi
}

# 3. A temporary directory for every server and store; removed on exit.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/idem-peers.XXXXXX")
chmod 755 "$tmp"
pg_started=0
cleanup() {
  local rc=$?
  set +e
  if [ "$pg_started" -eq 1 ]; then
    as_user postgres "$pg_bin/pg_ctl" -D "$tmp/pg" -m fast -w -t 30 stop \
      >/dev/null 2>&1 || log "pg_ctl stop failed (see $tmp/pg.log)"
  fi
  for name in redis-durable redis-memory; do
    pidfile="$tmp/$name/redis.pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      log "redis-server $pid did not stop; sending SIGKILL"
      kill -9 "$pid" 2>/dev/null
    fi
  done
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# PostgreSQL: a fresh cluster, TCP on 127.0.0.1 only, socket in $tmp.
mkdir "$tmp/pg" "$tmp/pgsock"
own postgres "$tmp/pg"
own postgres "$tmp/pgsock"
as_user postgres "$pg_bin/initdb" -D "$tmp/pg" -U postgres -A trust -E UTF8 \
  --locale=C >"$tmp/initdb.log" 2>&1 || {
  cat "$tmp/initdb.log" >&2
  log "initdb failed"
  exit 1
}
cat >>"$tmp/pg/postgresql.conf" <<EOF
# idem peers benchmark: defaults, except memory sized for the machine.
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$tmp/pgsock'
shared_buffers = 512MB
max_wal_size = 4GB
fsync = on
synchronous_commit = on
EOF
touch "$tmp/pg.log"
own postgres "$tmp/pg.log"
pg_started=1
as_user postgres "$pg_bin/pg_ctl" -D "$tmp/pg" -l "$tmp/pg.log" -w -t 60 \
  start >/dev/null || {
  tail -n 20 "$tmp/pg.log" >&2
  log "PostgreSQL did not start"
  exit 1
}

# Redis: one server with the AOF fsynced before every reply, one without
# persistence.
start_redis() {
  local name=$1 port=$2 persistence=$3
  local dir="$tmp/$name"
  mkdir "$dir"
  own redis "$dir"
  {
    echo "bind 127.0.0.1"
    echo "port $port"
    echo "protected-mode yes"
    echo "daemonize yes"
    echo "pidfile $dir/redis.pid"
    echo "logfile $dir/redis.log"
    echo "dir $dir"
    echo 'save ""'
    echo "$persistence"
  } >"$dir/redis.conf"
  as_user redis "$redis_server" "$dir/redis.conf"
  for _ in $(seq 1 100); do
    if "$redis_cli" -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$dir/redis.log" >&2 || true
  log "redis-server ($name) did not start"
  exit 1
}
start_redis redis-durable "$redis_durable_port" \
  "$(printf 'appendonly yes\nappendfsync always')"
start_redis redis-memory "$redis_memory_port" "appendonly no"

log "PostgreSQL on 127.0.0.1:$pg_port, Redis on 127.0.0.1:$redis_durable_port" \
    "(appendfsync always) and 127.0.0.1:$redis_memory_port (no persistence);" \
    "scratch: $tmp"

# 4. The benchmark, bounded in time; the servers stop on exit (trap).
mkdir "$tmp/scratch"
rc=0
timeout --signal=TERM --kill-after=30 "$overall_timeout" "$bench" \
  --pg="host=127.0.0.1 port=$pg_port user=postgres dbname=postgres connect_timeout=5" \
  --redis_durable="127.0.0.1:$redis_durable_port" \
  --redis_memory="127.0.0.1:$redis_memory_port" \
  --pg_test_fsync="$pg_bin/pg_test_fsync" \
  --dir="$tmp/scratch" "$@" || rc=$?
if [ "$rc" -eq 124 ]; then
  log "benchmark stopped after the ${overall_timeout} s limit"
fi
exit "$rc"

#!/usr/bin/env bash
# Installs the Debian 12 packages idem needs to build and test, if missing.
# Idempotent; prints nothing when everything is already installed.
# Usage: scripts/install-deps.sh [extra-package ...]
set -euo pipefail

# Everything the build uses, the optional parts included, so that
# scripts/test.sh runs every suite: librdkafka-dev for the Kafka adapter
# (kafka/) and its tests, prometheus-cpp-dev for the Prometheus collectors
# (prometheus/), idem-ctl metrics and idem-kafka-demo --metrics_port,
# libpq-dev and libhiredis-dev for bench/peers/ (hiredis also for redis/);
# libnats-dev for nats/, librabbitmq-dev for rabbitmq/; redis-server,
# nats-server and rabbitmq-server, which the broker suites (label brokers)
# start privately; ccache, which the build
# scripts put in front of the compilers (scripts/compiler-cache.sh).
packages=(
  cmake make g++ pkgconf ccache
  librocksdb-dev libabsl-dev libxxhash-dev
  libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  librdkafka-dev prometheus-cpp-dev libpq-dev libhiredis-dev
  libnats-dev librabbitmq-dev redis-server nats-server rabbitmq-server
  "$@"
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The package starts a system RabbitMQ node; the tests start their own.
if [[ " ${missing[*]} " == *" rabbitmq-server "* ]]; then
  service rabbitmq-server stop >/dev/null 2>&1 || true
fi

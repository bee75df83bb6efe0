#!/usr/bin/env bash
# Installs the Debian 12 packages idem needs to build and test, if missing.
# Idempotent; prints nothing when everything is already installed.
# Usage: scripts/install-deps.sh [--demo | --check] [extra-package ...]
#   (none)   everything: the tests, the benchmarks and the optional parts
#   --demo   only what scripts/demo.sh builds: the core, the crash harness
#            and the tools' logic (idem-demo, idem-crashtest)
#   --check  installs nothing: exits 0 if everything is installed, 1 if not
set -euo pipefail

# What idem-demo and idem-crashtest need: the compiler and CMake; RocksDB,
# Abseil and xxHash for the core; nlohmann-json for util/'s JSON writer;
# CLI11 for the tools' flags; ccache, which the build scripts put in front of
# the compilers (scripts/compiler-cache.sh).
demo_packages=(
  cmake make g++ ccache
  librocksdb-dev libabsl-dev libxxhash-dev
  nlohmann-json3-dev libcli11-dev
)
# Everything else the build uses, the optional parts included, so that
# scripts/test.sh runs every suite: pkgconf, which finds librdkafka, libpq
# and hiredis; GoogleTest and Google Benchmark; librdkafka-dev for the Kafka
# adapter (kafka/) and its tests, prometheus-cpp-dev for the Prometheus
# collectors (prometheus/), idem-ctl metrics and idem-kafka-demo
# --metrics_port; libpq-dev and libhiredis-dev for bench/peers/ (hiredis
# also for redis/); libssl-dev for the TLS of redis/ and rabbitmq/;
# libnats-dev for nats/, librabbitmq-dev for rabbitmq/;
# redis-server, nats-server and rabbitmq-server, which the broker suites
# (label brokers) start privately, and openssl, with which the NATS, Redis
# and RabbitMQ suites make the certificates of their TLS servers; for the
# Python package (python/):
# python3-dev and pybind11-dev to build it, python3-pytest to test it,
# python3-venv, python3-pip, python3-setuptools and python3-wheel for
# `pip install --no-build-isolation .`, python3-confluent-kafka for its
# Kafka example.
full_packages=(
  pkgconf
  libgtest-dev libgmock-dev libbenchmark-dev
  librdkafka-dev prometheus-cpp-dev libpq-dev libhiredis-dev libssl-dev
  libnats-dev librabbitmq-dev redis-server nats-server rabbitmq-server
  openssl
  python3-dev pybind11-dev python3-pybind11 python3-pytest python3-venv
  python3-pip python3-setuptools python3-wheel python3-confluent-kafka
)

mode=full
case "${1:-}" in
  --demo) mode=demo; shift ;;
  --check) mode=check; shift ;;
esac
packages=("${demo_packages[@]}")
[ "$mode" = demo ] || packages+=("${full_packages[@]}")
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$mode" = check ] && exit 1

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

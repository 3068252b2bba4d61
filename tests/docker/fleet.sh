#!/usr/bin/env bash
# docs/fleet/compose.yaml, run as written: PostgreSQL, two bridges on workspace volumes of their own and
# a round-robin nginx; then tests/docker/fleet_scenario.py drives it through the proxy only (a session,
# uploads, files, messages, SSE; the runner's container stopped; the session goes on on the other).
#
# Needs root on Debian, like smoke.sh: it installs docker.io, mmdebstrap and docker-compose with apt
# when they are missing and starts dockerd itself (stopped again at exit). No image registry is
# reachable, so the images the compose file names are made here: the bridge's from the image smoke.sh
# built (when it holds this tree's code; else from the Dockerfile), PostgreSQL and nginx from Debian's
# packages (tests/docker/fleet/). Everything it makes is named acp-fleet-* and removed at exit. When
# Docker cannot be started here, it prints a NOTICE and exits 0; once Docker runs, any failure exits 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
START=$(date +%s)
WORK=$(mktemp -d)
export DEBIAN_FRONTEND=noninteractive
PROJECT=acp-fleet-$$
BRIDGE=acp-fleet-bridge-$$
BASE=$(sed -n 's/^ARG BASE=//p' Dockerfile)
PYTHON=${PYTHON:-.venv/bin/python}
SMOKE_IMAGE=${ACP_FLEET_FROM:-acp-rest-bridge:smoke} # the image smoke.sh built

notice() {
  echo "NOTICE: the fleet's compose file not run: $1"
  rm -rf "$WORK"
  exit 0
}

[ "$(id -u)" = 0 ] || notice "needs root (apt, dockerd)"
command -v apt-get >/dev/null || notice "needs apt-get (Debian)"
if ! command -v dockerd >/dev/null || ! command -v mmdebstrap >/dev/null || ! command -v docker-compose >/dev/null; then
  { apt-get update -q -o DPkg::Lock::Timeout=300 \
    && apt-get install -y -q -o DPkg::Lock::Timeout=300 docker.io mmdebstrap docker-compose; } >"$WORK/apt.log" 2>&1 \
    || notice "apt-get install docker.io mmdebstrap docker-compose failed: $(tail -1 "$WORK/apt.log")"
fi

DOCKERD_PID=
compose() { docker-compose -p "$PROJECT" -f docs/fleet/compose.yaml "$@"; }
cleanup() {
  compose down -v --timeout 5 >/dev/null 2>&1 || true
  docker rmi -f "$BRIDGE" acp-fleet-postgres acp-fleet-nginx >/dev/null 2>&1 || true
  if [ -n "$DOCKERD_PID" ]; then kill "$DOCKERD_PID" 2>/dev/null || true; wait "$DOCKERD_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
if ! docker info >/dev/null 2>&1; then
  dockerd >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || notice "dockerd did not start: $(tail -1 "$WORK/dockerd.log")"
fi

# ---- the base image, made locally once per machine (as smoke.sh does) ---------------------------------
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  mmdebstrap --quiet --variant=minbase --include=ca-certificates \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='cp -a /usr/local/share/ca-certificates/. "$1/usr/local/share/ca-certificates/"' \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null 2>&1' \
    bookworm "$WORK/rootfs.tar" /etc/apt/sources.list.d/debian.sources
  docker import -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' "$WORK/rootfs.tar" "$BASE" >/dev/null
  rm -f "$WORK/rootfs.tar"
fi

trap 'echo "FAILED: command at line $LINENO"; echo "0 passed, 1 failed"' ERR
build() {
  docker build -q "$@" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; echo "FAILED: docker build $*"; echo "0 passed, 1 failed"; exit 1; }
}

# ---- the images the compose file names ---------------------------------------------------------------
BUILD_START=$(date +%s)
# The bridge: smoke.sh's image plus the postgres extra, when that image holds this tree's app/.
SITE=/opt/acp-rest-bridge/lib/python3.11/site-packages/app
ours=$(cd app && find . -name '*.py' | LC_ALL=C sort | xargs cat | sha256sum)
theirs=$(docker run --rm --entrypoint sh "$SMOKE_IMAGE" -c \
  "cd $SITE && find . -name '*.py' | LC_ALL=C sort | xargs cat | sha256sum" 2>/dev/null || true)
if [ "$ours" = "$theirs" ]; then
  printf 'FROM %s\nCOPY constraints.txt /tmp/\nRUN /opt/acp-rest-bridge/bin/pip install -q -c /tmp/constraints.txt "psycopg[binary]" psycopg-pool && rm /tmp/constraints.txt\n' \
    "$SMOKE_IMAGE" >"$WORK/bridge.Dockerfile"
  cp constraints.txt "$WORK/"
  build -t "$BRIDGE" -f "$WORK/bridge.Dockerfile" "$WORK"
  from="smoke.sh's image"
else
  build -t "$BRIDGE" --build-arg EXTRAS=postgres .
  from="the Dockerfile"
fi
build -t acp-fleet-postgres --build-arg "BASE=$BASE" -f tests/docker/fleet/postgres.Dockerfile tests/docker/fleet
build -t acp-fleet-nginx --build-arg "BASE=$BASE" -f tests/docker/fleet/nginx.Dockerfile tests/docker/fleet
echo "images built in $(($(date +%s) - BUILD_START)) s (the bridge's from $from)"

# ---- the compose file, as written ----------------------------------------------------------------
PORT=$("$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export ACP_FLEET_BRIDGE_IMAGE=$BRIDGE ACP_FLEET_POSTGRES_IMAGE=acp-fleet-postgres ACP_FLEET_PROXY_IMAGE=acp-fleet-nginx
export ACP_FLEET_PORT=$PORT ACP_BRIDGE_TOKEN=fleet-$$ POSTGRES_PASSWORD=pw-$$-$RANDOM ACP_BRIDGE_LEASE_SECONDS=3
compose up -d --no-build >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; compose logs --tail 40 || true; echo "FAILED: compose up"; echo "0 passed, 1 failed"; exit 1; }
trap - ERR
set +e
"$PYTHON" -m tests.docker.fleet_scenario --url "http://127.0.0.1:$PORT" --token "$ACP_BRIDGE_TOKEN" --project "$PROJECT"
status=$?
set -e
if [ "$status" != 0 ]; then
  compose logs --tail 60 || true
fi
echo "compose scenario: $(($(date +%s) - START)) s in all"
exit "$status"

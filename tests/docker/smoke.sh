#!/usr/bin/env bash
# Build the Docker image and smoke-test a container: non-root, tini as PID 1, HEALTHCHECK healthy,
# the token, the open-API warning, a mock session, no zombies after 20 mock `run` commands, a clean
# `docker stop`. Prints the image size and the time taken.
#
# Needs root on Debian: it installs docker.io and mmdebstrap with apt when they are missing and starts
# dockerd itself (stopped again at exit). These machines reach no image registry, so the base image
# the Dockerfile names is made locally with mmdebstrap from the Debian repository apt uses, with the
# host's extra CA certificates (pip in the build needs them). When Docker cannot be started here, it
# prints a NOTICE and exits 0; once Docker runs, any failure exits 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
START=$(date +%s)
WORK=$(mktemp -d)
export DEBIAN_FRONTEND=noninteractive
PORT=${PORT:-18468}
NAME=acp-rest-bridge-smoke
IMAGE=acp-rest-bridge:smoke
BASE=$(sed -n 's/^ARG BASE=//p' Dockerfile)

notice() {
  echo "NOTICE: Docker image not built or tested: $1"
  rm -rf "$WORK"
  exit 0
}

[ "$(id -u)" = 0 ] || notice "needs root (apt, dockerd)"
command -v apt-get >/dev/null || notice "needs apt-get (Debian)"
if ! command -v dockerd >/dev/null || ! command -v mmdebstrap >/dev/null; then
  { apt-get update -q -o DPkg::Lock::Timeout=300 && apt-get install -y -q -o DPkg::Lock::Timeout=300 docker.io mmdebstrap; } >"$WORK/apt.log" 2>&1 \
    || notice "apt-get install docker.io mmdebstrap failed: $(tail -1 "$WORK/apt.log")"
fi

DOCKERD_PID=
cleanup() {
  docker rm -f "$NAME" "$NAME-open" >/dev/null 2>&1 || true
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

# ---- the base image, made locally once per machine ----------------------------------------------
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

PASSED=0
fail() {
  docker logs "$NAME" 2>&1 | tail -30 || true
  echo "FAILED: $1"
  echo "$PASSED passed, 1 failed"
  exit 1
}
ok() { PASSED=$((PASSED + 1)); echo "ok: $1"; }
trap 'echo "FAILED: command at line $LINENO"; echo "$PASSED passed, 1 failed"' ERR

BUILD_START=$(date +%s)
docker build -q -t "$IMAGE" . >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "docker build"; }
SIZE=$(docker image inspect -f '{{.Size}}' "$IMAGE")
echo "image $IMAGE: $((SIZE / 1000000)) MB, built in $(($(date +%s) - BUILD_START)) s"

# ---- a container with a token -------------------------------------------------------------------
docker run -d --name "$NAME" -e ACP_BRIDGE_TOKEN=smoke -e ACP_BRIDGE_ACP_REGISTRY_URL= -p "127.0.0.1:$PORT:2468" "$IMAGE" >/dev/null
URL="http://127.0.0.1:$PORT"
AUTH=(-H "Authorization: Bearer smoke")
for _ in $(seq 1 60); do curl -fsS --max-time 2 "$URL/v1/health" >/dev/null 2>&1 && break; sleep 0.5; done
health=$(curl -fsS --max-time 2 "$URL/v1/health") || fail "server did not answer /v1/health"
[ "$health" = '{"status":"ok"}' ] || fail "health: $health"
ok "health"

[ "$(docker exec "$NAME" cat /proc/1/comm)" = tini ] || fail "PID 1 is not tini"
uid=$(docker exec "$NAME" id -u)
[ "$uid" != 0 ] || fail "the server runs as root"
owner=$(docker exec "$NAME" stat -c '%u' /var/lib/acp-rest-bridge /workspace | tr '\n' ' ')
[ "$owner" = "$uid $uid " ] || fail "data dir and workspace are not the server user's: $owner"
ok "tini is PID 1, the server runs as uid $uid, which owns the data dir and the workspace"

for _ in $(seq 1 40); do
  [ "$(docker inspect -f '{{.State.Health.Status}}' "$NAME")" = healthy ] && break
  sleep 0.5
done
[ "$(docker inspect -f '{{.State.Health.Status}}' "$NAME")" = healthy ] || fail "HEALTHCHECK is not healthy"
ok "HEALTHCHECK healthy"

code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/agents")
[ "$code" = 401 ] || fail "expected 401 without the token, got $code"
logs=$(docker logs "$NAME" 2>&1)
[[ "$logs" == *"auth on"* ]] || fail "no start-up line with 'auth on'"
ok "token required; start-up line"

post() { curl -fsS "${AUTH[@]}" -X POST "$URL$1" -H 'content-type: application/json' -d "$2"; }
created=$(post /v1/sessions/smoke '{"agent":"mock"}') || fail "create failed"
[[ "$created" == *'"healthy":true'* ]] || fail "create failed: $created"
# Waits (at most 20 s) until the session has had n turn.ended events.
turns() {
  local seen=0
  for _ in $(seq 1 200); do
    seen=$( (curl -fsS "${AUTH[@]}" "$URL/v1/sessions/smoke/events" || true) | { grep -o '"type":"turn.ended"' || true; } | wc -l)
    [ "$seen" -ge "$1" ] && return 0
    sleep 0.1
  done
  fail "turn $1 did not end (turns ended: $seen)"
}
post /v1/sessions/smoke/messages '{"message":"Reply with exactly the single word OK."}' || fail "message failed"
turns 1
ok "mock session"

for i in $(seq 1 20); do
  # `sleep` outlives its shell: an orphan that PID 1 must reap.
  post /v1/sessions/smoke/messages "{\"message\":\"run sleep 0.1 & echo $i\"}" || fail "run $i failed"
  turns $((i + 1))
done
sleep 0.5 # the last orphans' sleep 0.1 ends
zombies=$(docker exec "$NAME" sh -c 'grep -l "^State:[[:space:]]*Z" /proc/[0-9]*/status 2>/dev/null | wc -l')
[ "$zombies" = 0 ] || fail "$zombies zombie processes after 20 mock run commands"
ok "no zombies after 20 mock run commands"

STOP_START=$(date +%s)
docker stop -t 10 "$NAME" >/dev/null
stop_s=$(($(date +%s) - STOP_START))
exit_code=$(docker inspect -f '{{.State.ExitCode}}' "$NAME")
[ "$exit_code" = 0 ] || fail "docker stop: exit code $exit_code"
[ "$stop_s" -lt 10 ] || fail "docker stop took ${stop_s}s (killed at the timeout)"
ok "docker stop: exit 0 in ${stop_s}s"

# ---- without a token on 0.0.0.0: a loud warning --------------------------------------------------
docker run -d --name "$NAME-open" -e ACP_BRIDGE_ACP_REGISTRY_URL= "$IMAGE" >/dev/null
for _ in $(seq 1 40); do docker logs "$NAME-open" 2>&1 | grep -q "WARNING: no token" && break; sleep 0.25; done
logs=$(docker logs "$NAME-open" 2>&1)
[[ "$logs" == *"WARNING: no token"* ]] || fail "no warning without a token"
docker rm -f "$NAME-open" >/dev/null
ok "open-API warning"

echo "$PASSED passed, 0 failed ($(($(date +%s) - START)) s)"

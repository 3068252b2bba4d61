#!/usr/bin/env bash
# Build the image and drive a mock session in a container. Needs root (apt, dockerd) on Debian.
# The machines this runs on reach no image registry: the base image is made locally with mmdebstrap
# and tagged python:3.11-slim, which the Dockerfile then uses as it is.
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d)
export DEBIAN_FRONTEND=noninteractive
PORT=${PORT:-18468}
NAME=acp-rest-bridge-smoke

if ! command -v dockerd >/dev/null || ! command -v mmdebstrap >/dev/null; then
  apt-get update -q >/dev/null
  apt-get install -y -q docker.io mmdebstrap >/dev/null
fi

DOCKERD_PID=
cleanup() {
  docker rm -f "$NAME" >/dev/null 2>&1 || true
  if [ -n "$DOCKERD_PID" ]; then kill "$DOCKERD_PID"; wait "$DOCKERD_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
if ! docker info >/dev/null 2>&1; then
  dockerd >"$WORK/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -20 "$WORK/dockerd.log"; exit 1; }
fi

if ! docker image inspect python:3.11-slim >/dev/null 2>&1; then
  if ! docker image inspect local/debian:bookworm >/dev/null 2>&1; then
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
      --aptopt='Acquire::Check-Valid-Until "false"' \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --customize-hook='cp -a /usr/local/share/ca-certificates/. "$1/usr/local/share/ca-certificates/"' \
      --customize-hook='chroot "$1" update-ca-certificates >/dev/null' \
      bookworm "$WORK/rootfs.tar" /etc/apt/sources.list.d/debian.sources
    docker import -c 'CMD ["/bin/bash"]' -c 'ENV LANG=C.UTF-8' "$WORK/rootfs.tar" local/debian:bookworm >/dev/null
  fi
  printf 'FROM local/debian:bookworm\nRUN ln -s /usr/bin/python3 /usr/local/bin/python\n' > "$WORK/Dockerfile.base"
  docker build -q -t python:3.11-slim -f "$WORK/Dockerfile.base" "$WORK" >/dev/null
fi

docker build -q -t acp-rest-bridge:smoke . >/dev/null
docker run -d --name "$NAME" -e ACP_BRIDGE_TOKEN=smoke -p "127.0.0.1:$PORT:2468" acp-rest-bridge:smoke >/dev/null
URL="http://127.0.0.1:$PORT"
AUTH=(-H "Authorization: Bearer smoke")
for _ in $(seq 1 60); do curl -fsS --max-time 2 "$URL/v1/health" >/dev/null 2>&1 && break; sleep 0.5; done
fail() { docker logs "$NAME" || true; echo "$1"; echo "0 passed, 1 failed"; exit 1; }
curl -fsS --max-time 2 "$URL/v1/health" >/dev/null || fail "server did not become healthy"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/agents")
[ "$code" = 401 ] || fail "expected 401 without the token, got $code"
curl -fsS "${AUTH[@]}" -X POST "$URL/v1/sessions/smoke" -H 'content-type: application/json' -d '{"agent":"mock"}' \
  | grep -q '"healthy":true' || fail "create failed"
curl -fsS "${AUTH[@]}" -X POST "$URL/v1/sessions/smoke/messages" -H 'content-type: application/json' \
  -d '{"message":"Reply with exactly the single word OK."}' || fail "message failed"
for _ in $(seq 1 40); do
  curl -fsS "${AUTH[@]}" "$URL/v1/sessions/smoke/events" | grep -q '"turn.ended"' && break
  sleep 0.25
done
curl -fsS "${AUTH[@]}" "$URL/v1/sessions/smoke/events" | grep -q '"turn.ended"' || fail "no turn.ended"
docker exec "$NAME" npm --version >/dev/null || fail "npm is missing: agent installs cannot work"
code=$(curl -s -o /dev/null -w '%{http_code}' "${AUTH[@]}" -X POST "$URL/v1/agents/amp/install" \
  -H 'content-type: application/json' -d '{}')
[ "$code" = 500 ] || fail "expected 500 install_failed for amp, got $code"
echo "1 passed, 0 failed"

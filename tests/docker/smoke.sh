#!/usr/bin/env bash
# Build the Docker image and smoke-test a container: non-root, tini as PID 1, HEALTHCHECK healthy,
# the token, the open-API warning, a mock session, no zombies after 20 mock `run` commands, a clean
# `docker stop`; then docs/docker.md's recipe with a host project mounted at /workspace: the server runs as
# the project's owner, which owns the data volume too, files written through /v1/fs, by the agent and
# by upload-batch (a hostile archive refused) belong to that owner on the host, and
# ACP_BRIDGE_UID/ACP_BRIDGE_GID hand the same data volume to another user; a project owned by root is
# said at start (a warning naming ACP_BRIDGE_UID) and written with ACP_BRIDGE_UID=0; `docker run
# --user` works on a new volume (files its user's, a home of its own) and is refused, saying why and
# what to do, on a volume it cannot write. Prints the image size and the time taken.
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
  docker rm -f "$NAME" "$NAME-open" "$NAME-project" "$NAME-root" "$NAME-user" "$NAME-user2" >/dev/null 2>&1 || true
  docker volume rm -f "$NAME-data" >/dev/null 2>&1 || true
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
# The server's uid: tini's child (the entrypoint execs it after dropping root).
server_uid() { docker exec "$1" sh -c 'stat -c %u /proc/$(cut -d" " -f1 /proc/1/task/1/children)'; }
uid=$(server_uid "$NAME")
[ "$uid" = 10001 ] || fail "the server runs as uid $uid, not bridge (10001)"
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
ok "docker stop: exit 0 (the server's own) in ${stop_s}s"

# ---- docs/docker.md's recipe: a host project mounted at /workspace, a named data volume -------------------
PROJECT="$WORK/project"
mkdir -p "$PROJECT"
echo keep >"$PROJECT/README.txt"
chown -R 4242:4343 "$PROJECT" # the host user who owns the project
docker volume create "$NAME-data" >/dev/null
run_project() {
  docker run -d --name "$NAME-project" -e ACP_BRIDGE_TOKEN=smoke -p "127.0.0.1:$PORT:2468" "$@" \
    -v "$PROJECT:/workspace" -v "$NAME-data:/var/lib/acp-rest-bridge" "$IMAGE" >/dev/null
  for _ in $(seq 1 60); do curl -fsS --max-time 2 "$URL/v1/health" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS --max-time 2 "$URL/v1/health" >/dev/null || { NAME="$NAME-project" fail "the project container did not start"; }
}
owner() { stat -c %u:%g "$1"; }
run_project
NAME="$NAME-project"
[ "$(server_uid "$NAME")" = 4242 ] || fail "the server does not run as the project's owner: $(server_uid "$NAME")"
[ "$(docker exec "$NAME" stat -c %u:%g /var/lib/acp-rest-bridge)" = 4242:4343 ] || fail "the data volume is not the project owner's"
ok "with a project mounted, the server runs as its owner (4242:4343), who owns the data volume"

curl -fsS "${AUTH[@]}" -X PUT "$URL/v1/fs/file?path=/workspace/from-fs.txt" --data-binary 'via fs' >/dev/null || fail "PUT /v1/fs/file"
[ "$(cat "$PROJECT/from-fs.txt")" = "via fs" ] && [ "$(owner "$PROJECT/from-fs.txt")" = 4242:4343 ] \
  || fail "from-fs.txt on the host: $(owner "$PROJECT/from-fs.txt" 2>&1)"
post /v1/sessions/smoke '{"agent":"mock"}' >/dev/null || fail "create in the project container"
post /v1/sessions/smoke/messages '{"message":"write /workspace/by-agent.txt written by the agent"}' || fail "write"
turns 1
post /v1/sessions/smoke/messages '{"message":"run mkdir /workspace/by-run && touch /workspace/by-run/file"}' || fail "run"
turns 2
for path in by-agent.txt by-run by-run/file; do
  [ "$(owner "$PROJECT/$path")" = 4242:4343 ] || fail "$path on the host: $(owner "$PROJECT/$path" 2>&1)"
done
ok "files written through /v1/fs and by the agent (fs/write_text_file, a terminal) belong to the host user"

mkdir -p "$WORK/archive/dir" && echo one >"$WORK/archive/one.txt" && echo two >"$WORK/archive/dir/two.txt"
tar -C "$WORK/archive" -cf "$WORK/upload.tar" one.txt dir
listed=$(curl -fsS "${AUTH[@]}" -X POST "$URL/v1/fs/upload-batch?path=/workspace/uploaded" \
  -H 'content-type: application/x-tar' --data-binary @"$WORK/upload.tar") || fail "upload-batch"
[[ "$listed" == *'/workspace/uploaded/dir/two.txt'* ]] || fail "upload-batch answered: $listed"
[ "$(cat "$PROJECT/uploaded/dir/two.txt")" = two ] || fail "uploaded file content"
for path in uploaded uploaded/one.txt uploaded/dir uploaded/dir/two.txt; do
  [ "$(owner "$PROJECT/$path")" = 4242:4343 ] || fail "$path on the host: $(owner "$PROJECT/$path" 2>&1)"
done
python3 - "$WORK/hostile.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as tar:
    link = tarfile.TarInfo("x"); link.type, link.linkname = tarfile.SYMTYPE, "d/q/../../.."
    tar.addfile(link)
    folder = tarfile.TarInfo("d"); folder.type = tarfile.DIRTYPE
    tar.addfile(folder)
    up = tarfile.TarInfo("d/q"); up.type, up.linkname = tarfile.SYMTYPE, ".."
    tar.addfile(up)
    evil = tarfile.TarInfo("x/evil.txt"); evil.size = 4
    tar.addfile(evil, io.BytesIO(b"evil"))
PY
code=$(curl -s -o "$WORK/hostile.out" -w '%{http_code}' "${AUTH[@]}" -X POST \
  "$URL/v1/fs/upload-batch?path=/workspace/hostile" --data-binary @"$WORK/hostile.tar")
[ "$code" = 400 ] || fail "a hostile archive answered $code: $(cat "$WORK/hostile.out")"
[ ! -e "$PROJECT/hostile" ] && [ ! -e "$PROJECT/evil.txt" ] && [ ! -e "$WORK/evil.txt" ] || fail "the hostile archive left files"
ok "upload-batch unpacks as the host user; a hostile archive is refused (400), nothing left ($(docker exec "$NAME" python3 --version))"

docker stop -t 10 "$NAME" >/dev/null
docker rm -f "$NAME" >/dev/null
NAME=${NAME%-project}
run_project -e ACP_BRIDGE_UID=4545 -e ACP_BRIDGE_GID=4646
NAME="$NAME-project"
[ "$(server_uid "$NAME")" = 4545 ] || fail "ACP_BRIDGE_UID is not the server's uid"
[ "$(docker exec "$NAME" stat -c %u:%g /var/lib/acp-rest-bridge/events.sqlite3)" = 4545:4646 ] \
  || fail "the data volume was not handed to ACP_BRIDGE_UID"
sessions=$(curl -fsS "${AUTH[@]}" "$URL/v1/sessions") || fail "sessions after the handover"
[[ "$sessions" == *'"sessionId":"smoke"'* ]] || fail "the earlier session is gone: $sessions"
docker rm -f "$NAME" >/dev/null
NAME=${NAME%-project}
ok "ACP_BRIDGE_UID/ACP_BRIDGE_GID: the same data volume handed to another user, its sessions kept"

# ---- a project owned by root: said at start with the setting that fixes it -----------------------
# Starts a container (name, then docker run options) on the usual port and waits until it is healthy.
start_named() {
  local name=$1
  shift
  docker run -d --name "$name" -e ACP_BRIDGE_TOKEN=smoke -p "127.0.0.1:$PORT:2468" "$@" "$IMAGE" >/dev/null
  for _ in $(seq 1 60); do curl -fsS --max-time 2 "$URL/v1/health" >/dev/null 2>&1 && break; sleep 0.5; done
  curl -fsS --max-time 2 "$URL/v1/health" >/dev/null || { NAME=$name fail "$name did not start"; }
}
put_file() { curl -s -o "$WORK/put.out" -w '%{http_code}' "${AUTH[@]}" -X PUT "$URL/v1/fs/file?path=$1" --data-binary "$2"; }
ROOT_PROJECT="$WORK/root-project"
mkdir -p "$ROOT_PROJECT" && chmod 755 "$ROOT_PROJECT"
start_named "$NAME-root" -v "$ROOT_PROJECT:/workspace"
logs=$(docker logs "$NAME-root" 2>&1)
[[ "$logs" == *"WARNING: /workspace (owner 0:0, mode 755) is not writable by the server's user 10001:10001"*"ACP_BRIDGE_UID=0"* ]] \
  || { NAME="$NAME-root" fail "no start-up warning naming ACP_BRIDGE_UID"; }
code=$(put_file /workspace/denied.txt x)
[ "$code" = 502 ] && grep -q "Permission denied" "$WORK/put.out" || { NAME="$NAME-root" fail "PUT answered $code: $(cat "$WORK/put.out")"; }
docker rm -f "$NAME-root" >/dev/null
start_named "$NAME-root" -e ACP_BRIDGE_UID=0 -e ACP_BRIDGE_GID=0 -e ACP_BRIDGE_LOG_FORMAT=json -v "$ROOT_PROJECT:/workspace"
! docker logs "$NAME-root" 2>&1 | grep -q "is not writable" || { NAME="$NAME-root" fail "a warning with ACP_BRIDGE_UID=0"; }
code=$(put_file /workspace/by-root.txt x)
[ "$code" = 200 ] && [ "$(owner "$ROOT_PROJECT/by-root.txt")" = 0:0 ] || { NAME="$NAME-root" fail "PUT as root answered $code"; }
docker rm -f "$NAME-root" >/dev/null
# In JSON logs the warning is a JSON record too.
start_named "$NAME-root" -e ACP_BRIDGE_LOG_FORMAT=json -v "$ROOT_PROJECT:/workspace"
docker logs "$NAME-root" 2>&1 | python3 -c '
import json, sys
records = [json.loads(line) for line in sys.stdin if line.startswith("{")]
assert any(r["level"] == "warning" and "ACP_BRIDGE_UID" in r["message"] for r in records), records' \
  || { NAME="$NAME-root" fail "no JSON warning record"; }
docker rm -f "$NAME-root" >/dev/null
ok "a root-owned project: a start-up warning naming ACP_BRIDGE_UID (else 502 Permission denied); ACP_BRIDGE_UID=0 writes it"

# ---- docker run --user: works on a new volume; refused, with the way out, where it cannot write ----
USER_PROJECT="$WORK/user-project"
mkdir -p "$USER_PROJECT" && chown 4242:4343 "$USER_PROJECT"
start_named "$NAME-user" --user 4242:4343 -v "$USER_PROJECT:/workspace"
[ "$(server_uid "$NAME-user")" = 4242 ] || { NAME="$NAME-user" fail "--user: the server runs as $(server_uid "$NAME-user")"; }
! docker logs "$NAME-user" 2>&1 | grep -q "is not writable" || { NAME="$NAME-user" fail "a warning for a writable project"; }
code=$(put_file /workspace/by-user.txt x)
[ "$code" = 200 ] && [ "$(owner "$USER_PROJECT/by-user.txt")" = 4242:4343 ] || { NAME="$NAME-user" fail "--user: PUT answered $code"; }
NAME="$NAME-user" post /v1/sessions/smoke '{"agent":"mock"}' >/dev/null || { NAME="$NAME-user" fail "--user: create"; }
post /v1/sessions/smoke/messages '{"message":"Reply with exactly the single word OK."}' || fail "--user: message"
NAME="$NAME-user" turns 1
home=$(docker exec "$NAME-user" sh -c 'tr "\0" "\n" < /proc/$(cut -d" " -f1 /proc/1/task/1/children)/environ | sed -n "s/^HOME=//p"')
[ "$home" = /var/lib/acp-rest-bridge/home ] || { NAME="$NAME-user" fail "--user: HOME is '$home'"; }
docker stop -t 10 "$NAME-user" >/dev/null
[ "$(docker inspect -f '{{.State.ExitCode}}' "$NAME-user")" = 0 ] || { NAME="$NAME-user" fail "--user: docker stop"; }
docker rm -f "$NAME-user" >/dev/null
# The named volume belongs to 4545:4646 now (the handover above): another --user cannot write it.
status=0
docker run --name "$NAME-user2" --user 4747:4848 -v "$NAME-data:/var/lib/acp-rest-bridge" "$IMAGE" >"$WORK/user2.out" 2>&1 || status=$?
[ "$status" = 2 ] || { cat "$WORK/user2.out"; fail "--user on a volume it cannot write: exit $status"; }
[ "$(cat "$WORK/user2.out")" = "acp-rest-bridge: started with --user 4747:4848, which cannot write the data volume \
/var/lib/acp-rest-bridge (owner 4545:4646): leave --user out and set -e ACP_BRIDGE_UID=4747 -e ACP_BRIDGE_GID=4848 \
instead (the server then runs as 4747:4848 and the volume is handed over to it), or mount a data volume that \
4747:4848 owns at /var/lib/acp-rest-bridge" ] || { cat "$WORK/user2.out"; fail "--user refused without its reason"; }
docker rm -f "$NAME-user2" >/dev/null
ok "--user: runs as that user on a new volume (files its own, a home in the volume, exit 0 on stop); refused in one line on a volume it cannot write"

# ---- without a token on 0.0.0.0: a loud warning --------------------------------------------------
docker run -d --name "$NAME-open" -e ACP_BRIDGE_ACP_REGISTRY_URL= "$IMAGE" >/dev/null
for _ in $(seq 1 40); do docker logs "$NAME-open" 2>&1 | grep -q "WARNING: no token" && break; sleep 0.25; done
logs=$(docker logs "$NAME-open" 2>&1)
[[ "$logs" == *"WARNING: no token"* ]] || fail "no warning without a token"
docker rm -f "$NAME-open" >/dev/null
ok "open-API warning"

echo "$PASSED passed, 0 failed ($(($(date +%s) - START)) s)"

#!/bin/sh
# The image's entrypoint (under tini): picks the user the server runs as, gives it the data volume
# and its home, and drops root with setpriv (util-linux) before it starts the command.
#
# The user: ACP_BRIDGE_UID / ACP_BRIDGE_GID when given (e.g. -e ACP_BRIDGE_UID=$(id -u)
# -e ACP_BRIDGE_GID=$(id -g)), else the owner of /workspace when a host directory owned by a user
# other than root is mounted there, else the image's own user `bridge` (10001). So files written
# through /v1/fs and by agents in a mounted project belong to its owner on the host.
#
# Started as another user already (docker run --user), it cannot hand anything over: it runs the
# command as that user when the data volume is writable to it (a new volume is: the image's data
# dir is writable to any user), with a home in the volume when it has none; else it refuses, saying
# why and what to do instead.
#
# Either way, a /workspace the server's user cannot write (a project owned by root, mounted) is
# said at start, with the setting that fixes it: writes there would fail with "Permission denied".
set -eu

DATA=${ACP_BRIDGE_DATA_DIR:-/var/lib/acp-rest-bridge}

# A line in the server's log format (ACP_BRIDGE_LOG_FORMAT=json: one JSON record).
say() { # level message
  if [ "${ACP_BRIDGE_LOG_FORMAT:-text}" = json ]; then
    message=$(printf '%s' "$2" | sed 's/\\/\\\\/g; s/"/\\"/g')
    printf '{"time": "%s", "level": "%s", "logger": "acp_rest_bridge.docker", "message": "%s"}\n' \
      "$(date -u +%Y-%m-%dT%H:%M:%S.000Z)" "$1" "$message" >&2
  elif [ "$1" = error ]; then
    printf 'acp-rest-bridge: %s\n' "$2" >&2
  else
    printf '%s: %s\n' "$(printf '%s' "$1" | tr a-z A-Z)" "$2" >&2
  fi
}

# Warns when /workspace exists but user $1:$2 may not write it ($3: how to pick another user).
check_workspace() {
  [ -d /workspace ] || return 0
  if [ "$(id -u)" = 0 ] && [ "$1" != 0 ]; then
    setpriv --reuid="$1" --regid="$2" --clear-groups -- test -w /workspace && return 0
  else
    test -w /workspace && return 0
  fi
  say warning "/workspace (owner $(stat -c %u:%g /workspace), mode $(stat -c %a /workspace)) is not writable \
by the server's user $1:$2: writing files there (PUT /v1/fs/file, upload-batch, agents' edits and commands) \
fails with 'Permission denied'. $3"
}

if [ "$(id -u)" != 0 ]; then
  # docker run --user: nothing can be handed over.
  uid=$(id -u)
  gid=$(id -g)
  if ! { mkdir -p "$DATA" 2>/dev/null && [ -w "$DATA" ] && { [ ! -e "$DATA/events.sqlite3" ] || [ -w "$DATA/events.sqlite3" ]; }; }; then
    say error "started with --user $uid:$gid, which cannot write the data volume $DATA (owner \
$(stat -c %u:%g "$DATA" 2>/dev/null || echo unknown)): leave --user out and set -e ACP_BRIDGE_UID=$uid \
-e ACP_BRIDGE_GID=$gid instead (the server then runs as $uid:$gid and the volume is handed over to it), \
or mount a data volume that $uid:$gid owns at $DATA"
    exit 2
  fi
  if [ -z "${HOME:-}" ] || [ "$HOME" = / ] || ! [ -w "$HOME" ]; then
    export HOME="$DATA/home" # agents keep their settings in their home
    mkdir -p "$HOME"
  fi
  check_workspace "$uid" "$gid" "Started with --user $uid:$gid: use the project's owner there, or leave \
--user out and set ACP_BRIDGE_UID/ACP_BRIDGE_GID to a user who may write it (-e ACP_BRIDGE_UID=0 \
-e ACP_BRIDGE_GID=0 for a project owned by root)."
  exec "$@"
fi

workspace_uid=$(stat -c %u /workspace 2>/dev/null || echo 0)
workspace_gid=$(stat -c %g /workspace 2>/dev/null || echo 0)
if [ "$workspace_uid" = 0 ]; then
  workspace_uid=$(id -u bridge)
  workspace_gid=$(id -g bridge)
fi
uid=${ACP_BRIDGE_UID:-$workspace_uid}
gid=${ACP_BRIDGE_GID:-$workspace_gid}
case "$uid$gid" in
  *[!0-9]*)
    say error "ACP_BRIDGE_UID and ACP_BRIDGE_GID must be numbers (got '$uid' and '$gid')"
    exit 2
    ;;
esac

# The data volume (events, agent installs, Node.js) and the home directory (agents' own settings)
# belong to that user; a volume made for another uid by an earlier run is handed over.
mkdir -p "$DATA"
for dir in "$DATA" /home/bridge; do
  if [ "$(stat -c %u:%g "$dir")" != "$uid:$gid" ]; then
    chown -R "$uid:$gid" "$dir"
  fi
done
if [ -n "${ACP_BRIDGE_UID:-}" ]; then
  how="ACP_BRIDGE_UID=$uid/ACP_BRIDGE_GID=$gid name a user who may not write it: name one who may \
(its owner, or -e ACP_BRIDGE_UID=0 -e ACP_BRIDGE_GID=0 for a project owned by root), or give the project \
to that user on the host (chown -R $uid:$gid)."
else
  how="Set -e ACP_BRIDGE_UID=<uid> -e ACP_BRIDGE_GID=<gid> to a user who may write it (-e ACP_BRIDGE_UID=0 \
-e ACP_BRIDGE_GID=0 for a project owned by root), or give the project to a user other than root on the \
host (the server then runs as that user)."
fi
check_workspace "$uid" "$gid" "$how"
export HOME=/home/bridge
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"

#!/bin/sh
# The image's entrypoint (under tini): picks the user the server runs as, gives it the data volume
# and its home, and drops root with setpriv (util-linux) before it starts the command.
#
# The user: ACP_BRIDGE_UID / ACP_BRIDGE_GID when given (e.g. -e ACP_BRIDGE_UID=$(id -u)
# -e ACP_BRIDGE_GID=$(id -g)), else the owner of /workspace when a host directory owned by a user
# other than root is mounted there, else the image's own user `bridge` (10001). So files written
# through /v1/fs and by agents in a mounted project belong to its owner on the host.
# Started as another user already (docker run --user), it changes nothing and starts the command.
set -eu

DATA=${ACP_BRIDGE_DATA_DIR:-/var/lib/acp-rest-bridge}
if [ "$(id -u)" != 0 ]; then
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
    echo "acp-rest-bridge: ACP_BRIDGE_UID and ACP_BRIDGE_GID must be numbers (got '$uid' and '$gid')" >&2
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
export HOME=/home/bridge
exec setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@"

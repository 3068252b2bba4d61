# acp-rest-bridge: the legacy sandbox-agent REST API over ACP agents.
#   docker build -t acp-rest-bridge .
#   docker run -p 127.0.0.1:2468:2468 -e ACP_BRIDGE_TOKEN=secret -v acp-data:/var/lib/acp-rest-bridge acp-rest-bridge
# With a project of the host mounted as the workspace, the server runs as the project's owner:
#   docker run -p 127.0.0.1:2468:2468 -e ACP_BRIDGE_TOKEN=secret -v "$PWD:/workspace" -v acp-data:/var/lib/acp-rest-bridge acp-rest-bridge
# Debian 12 (bookworm) slim, pinned to a point release; its python3 is 3.11. The Python dependencies
# are pinned by constraints.txt. Node.js is not in the image: the first agent install that needs npm
# installs Node.js 24 LTS into the data volume (ACP_BRIDGE_NODE_ON_DEMAND).
ARG BASE=debian:12.11-slim

# ---- build: a venv with the server and its pinned dependencies ----------------------------------
FROM ${BASE} AS build
ENV DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/acp-rest-bridge
WORKDIR /src
COPY constraints.txt pyproject.toml README.md ./
COPY app ./app
# EXTRAS=postgres: the PostgreSQL event store of a fleet (docs/fleet/compose.yaml).
ARG EXTRAS=""
RUN /opt/acp-rest-bridge/bin/pip install -c constraints.txt ".${EXTRAS:+[$EXTRAS]}" \
    && /opt/acp-rest-bridge/bin/pip uninstall -y -q setuptools

# ---- run: python3, tini, the venv; no compilers, no build caches --------------------------------
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 tini ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
    && useradd --create-home --uid 10001 --shell /usr/sbin/nologin bridge \
    && mkdir -p /var/lib/acp-rest-bridge /workspace \
    && chown bridge:bridge /var/lib/acp-rest-bridge /workspace \
    && chmod 1777 /var/lib/acp-rest-bridge /workspace
COPY --from=build /opt/acp-rest-bridge /opt/acp-rest-bridge
COPY docker/entrypoint.sh /usr/local/bin/acp-rest-bridge-entrypoint

ENV PATH=/opt/acp-rest-bridge/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ACP_BRIDGE_HOST=0.0.0.0 \
    ACP_BRIDGE_PORT=2468 \
    ACP_BRIDGE_DATA_DIR=/var/lib/acp-rest-bridge \
    ACP_BRIDGE_NODE_ON_DEMAND=1

# The container starts as root only for the entrypoint, which runs the server as the workspace's
# owner (or ACP_BRIDGE_UID/ACP_BRIDGE_GID; default bridge, 10001), not as root unless asked to.
# The data dir and the workspace are writable to any user (sticky, as /tmp), so a new volume works
# for a server started with `docker run --user` too (the entrypoint can hand nothing over then).
# Sessions start in the server's working directory: the sandbox's workspace.
WORKDIR /workspace
VOLUME ["/var/lib/acp-rest-bridge"]
EXPOSE 2468
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('ACP_BRIDGE_PORT', '2468') + '/v1/health', timeout=2)"]
# tini is PID 1: it forwards signals to the server and reaps the orphans of agents' children; the
# server exits 0 once SIGTERM has stopped it.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/acp-rest-bridge-entrypoint"]
STOPSIGNAL SIGTERM
CMD ["acp-rest-bridge", "server"]

# acp-rest-bridge: the legacy sandbox-agent REST API over ACP agents.
#   docker build -t acp-rest-bridge .
#   docker run -p 127.0.0.1:2468:2468 -e ACP_BRIDGE_TOKEN=secret acp-rest-bridge
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ACP_BRIDGE_HOST=0.0.0.0 \
    ACP_BRIDGE_PORT=2468 \
    ACP_BRIDGE_DATA_DIR=/var/lib/acp-rest-bridge

# Node.js and npm: the agents' ACP adapters are npm packages that POST /v1/agents/{agent}/install (and
# creating a session with a missing agent) installs into the data dir. --build-arg NODE=0 leaves them
# out, for an image that runs only the mock agent and agents provided otherwise.
ARG NODE=1
RUN if [ "$NODE" = 1 ]; then \
        apt-get update && apt-get install -y --no-install-recommends nodejs npm \
        && rm -rf /var/lib/apt/lists/*; \
    fi

RUN python3 -m venv /opt/acp-rest-bridge
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
RUN /opt/acp-rest-bridge/bin/pip install --no-cache-dir . \
    && mkdir -p /var/lib/acp-rest-bridge /workspace

# Sessions start in the server's working directory: the sandbox's workspace.
WORKDIR /workspace
EXPOSE 2468
VOLUME ["/var/lib/acp-rest-bridge"]
STOPSIGNAL SIGTERM
CMD ["/opt/acp-rest-bridge/bin/acp-rest-bridge", "server"]

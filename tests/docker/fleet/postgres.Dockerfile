# A stand-in for the postgres:15 image where no image registry is reachable (tests/docker/fleet.sh):
# Debian's PostgreSQL 15, set up from POSTGRES_USER, POSTGRES_PASSWORD and POSTGRES_DB at first start,
# as the official image is.
ARG BASE=debian:12.11-slim
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive PGDATA=/var/lib/postgresql/data
RUN apt-get update \
    && apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/*
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/postgres-entrypoint"]

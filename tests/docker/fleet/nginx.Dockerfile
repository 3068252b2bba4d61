# A stand-in for the nginx image where no image registry is reachable (tests/docker/fleet.sh):
# Debian's nginx, serving what /etc/nginx/conf.d/ holds, as the official image does.
ARG BASE=debian:12.11-slim
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
    && apt-get install -y --no-install-recommends nginx-light \
    && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default \
    && ln -sf /dev/stdout /var/log/nginx/access.log && ln -sf /dev/stderr /var/log/nginx/error.log
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]

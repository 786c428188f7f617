# Larder in a container: built with the Swift toolchain the project builds with, run on slim
# Debian with only the libraries the binary links (ldd lists Debian's, nothing of Swift's).
#   docker build -t larder .
#   (umask 077; openssl rand -hex 32 > admin.token) && sudo chown 10001 admin.token
#   docker run -d --name larder --stop-timeout 30 -p 3128:3128 -p 127.0.0.1:3129:3129 \
#       -v larder-cache:/var/cache/larder -v larder-state:/var/lib/larder \
#       -v $PWD/admin.token:/run/secrets/admin-token:ro \
#       -v $PWD/config/container.toml:/etc/larder/larder.toml:ro larder
# or `docker compose up -d` with compose.yaml. config/container.toml listens on all addresses
# inside the container, explains its ACL, and needs the admin token (a Docker secret).
# --stop-timeout (compose: stop_grace_period) must exceed the configuration's proxy.drain_timeout.
# Every file the build needs is named by a COPY line below; CI builds the binary from a folder
# made of exactly those (scripts/docker-context.sh), so a missing COPY fails CI.
#
# Base images are named by tag. Pin them by digest where a registry is reachable:
#   docker build --build-arg SWIFT_IMAGE=swift:6.3.1-bookworm@sha256:<digest> \
#       --build-arg RUNTIME_IMAGE=debian:bookworm-slim@sha256:<digest> -t larder .
# (`docker buildx imagetools inspect swift:6.3.1-bookworm` prints the digest.)
ARG SWIFT_IMAGE=swift:6.3.1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${SWIFT_IMAGE} AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        make pkg-config libcurl4-openssl-dev libssl-dev libsystemd-dev libcrypt-dev libmimalloc-dev curl python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile Package.swift Package.resolved ./
COPY scripts ./scripts
COPY Sources ./Sources
COPY Tests ./Tests
COPY Fuzz ./Fuzz
RUN make release && install -D -m 0755 .build/release/larder /out/larder

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libcurl4 libssl3 libsystemd0 libcrypt1 libmimalloc2.0 libstdc++6 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/cache/larder --shell /usr/sbin/nologin larder \
    && install -d -o larder -g larder -m 0700 /var/cache/larder /var/lib/larder \
    && install -d -m 0755 /etc/larder
COPY --from=build /out/larder /usr/local/bin/larder
COPY config/container.toml /usr/share/doc/larder/container.toml
COPY config/larder.toml /usr/share/doc/larder/larder.toml
USER larder
WORKDIR /var/lib/larder
# The cache, and the state that must outlive the container: the CA made for tls.intercept.
VOLUME ["/var/cache/larder", "/var/lib/larder"]
EXPOSE 3128 3129
# Docker secrets are files in /run/secrets: the credential names systemd's LoadCredential= uses
# (admin-token, proxy-users) apply there too, and ${CREDENTIALS_DIRECTORY} in the configuration
# means that directory.
ENV CREDENTIALS_DIRECTORY=/run/secrets
# SIGTERM drains in-flight requests for proxy.drain_timeout, then exits 0.
STOPSIGNAL SIGTERM
# /etc/larder/larder.toml is used when mounted (config/container.toml is the example); without
# it, the embedded defaults listen on the container's loopback only and nothing outside reaches it.
# `serve` makes the CA in tls.ca_dir when tls.intercept lists hosts and there is none.
ENTRYPOINT ["/usr/local/bin/larder"]
CMD ["serve", "--cache-dir", "/var/cache/larder"]
# `larder health` asks the admin listener the configuration names (LARDER_CONFIG, else
# /etc/larder/larder.toml), so moving it needs no edit here.
HEALTHCHECK --interval=30s --timeout=10s --start-period=5s \
    CMD ["/usr/local/bin/larder", "health"]

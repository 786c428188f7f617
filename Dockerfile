# Larder in a container: build with the official Swift image, run on slim Debian.
#   docker build -t larder .
#   docker run -d --name larder -p 3128:3128 -p 3129:3129 -v larder-cache:/var/cache/larder \
#       -v $PWD/larder.toml:/etc/larder/larder.toml:ro larder
# The configuration must listen on 0.0.0.0 (or [::]) and allow the clients' networks to be
# reachable from outside the container, for example:
#   [proxy]
#   listen = ["0.0.0.0:3128"]
#   allow = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "127.0.0.0/8"]
#   [admin]
#   listen = "0.0.0.0:3129"
#   token = "change-me"

FROM swift:6.0-bookworm AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libcurl4-openssl-dev libsystemd-dev libmimalloc-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
RUN swift build -c release --product larder --static-swift-stdlib \
    && install -D .build/release/larder /out/larder

FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libcurl4 libsystemd0 libmimalloc2.0 ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/cache/larder --shell /usr/sbin/nologin larder \
    && install -d -o larder -g larder -m 0700 /var/cache/larder \
    && install -d -m 0755 /etc/larder
COPY --from=build /out/larder /usr/local/bin/larder
COPY config/larder.toml /usr/share/doc/larder/larder.toml
USER larder
VOLUME ["/var/cache/larder"]
EXPOSE 3128 3129
# /etc/larder/larder.toml is used when mounted; otherwise the embedded defaults (loopback only).
ENTRYPOINT ["/usr/local/bin/larder"]
CMD ["serve", "--cache-dir", "/var/cache/larder"]
HEALTHCHECK --interval=30s --timeout=3s --start-period=5s \
    CMD curl -fsS http://127.0.0.1:3129/healthz || exit 1

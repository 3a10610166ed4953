# nginx + the QoE collector (one image, two services in docker-compose.yml).
# Build context: the repository root.

# The player bundle and the dashboard's chart library come from npm, pinned by lockfiles.
FROM node:20-bookworm-slim AS web
WORKDIR /src
COPY player/package.json player/package-lock.json player/
RUN cd player && npm ci --no-audit --no-fund
COPY player/ player/
RUN cd player && npm run build
COPY server/web/package.json server/web/package-lock.json server/web/
RUN cd server/web && npm ci --no-audit --no-fund

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-venv nginx-light mptcpd curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/mpstream
COPY pyproject.toml README.md ./
COPY mpstream/ mpstream/
COPY encoder/ encoder/
COPY manifests/ manifests/
COPY netem/ netem/
COPY player/ player/
COPY runner/ runner/
COPY server/ server/
COPY --from=web /src/player/dist/ player/dist/
COPY --from=web /src/server/web/node_modules/ server/web/node_modules/
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -e .
ENV PATH=/opt/venv/bin:$PATH
EXPOSE 8080 8081

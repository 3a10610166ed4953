# nginx + the QoE collector (one image, two services in docker-compose.yml).
# Build context: the repository root. BASE_IMAGE: any Debian 12 image (see docs/compose.md).
ARG BASE_IMAGE=debian:bookworm-slim

# The player bundle and the dashboard's chart library come from npm, pinned by lockfiles.
FROM ${BASE_IMAGE} AS web
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY player/package.json player/package-lock.json player/
RUN --mount=type=cache,target=/root/.npm cd player && npm ci --no-audit --no-fund
COPY player/ player/
RUN cd player && npm run build
COPY server/web/package.json server/web/package-lock.json server/web/
RUN --mount=type=cache,target=/root/.npm cd server/web && npm ci --no-audit --no-fund

FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      python3 python3-venv nginx-light mptcpize curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/mpstream
# Dependencies first (pinned in pyproject.toml), so that a change to the code reuses this layer.
COPY pyproject.toml ./
COPY docker/requirements.py docker/
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/venv \
 && python3 docker/requirements.py >/tmp/requirements.txt \
 && /opt/venv/bin/pip install --disable-pip-version-check -r /tmp/requirements.txt
COPY README.md ./
COPY mpstream/ mpstream/
COPY encoder/ encoder/
COPY manifests/ manifests/
COPY netem/ netem/
COPY player/ player/
COPY runner/ runner/
COPY server/ server/
COPY --from=web /src/player/dist/ player/dist/
COPY --from=web /src/server/web/node_modules/ server/web/node_modules/
RUN /opt/venv/bin/pip install --disable-pip-version-check --no-cache-dir --no-deps -e .
ENV PATH=/opt/venv/bin:$PATH
EXPOSE 8080 8081

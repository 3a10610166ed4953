# The encoder job: writes a media tree into the shared volume, then exits.
# Build context: the repository root. BASE_IMAGE: any Debian 12 image (see docs/compose.md).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ffmpeg ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/mpstream
# Dependencies first (pinned in pyproject.toml), so that a change to the code reuses this layer.
COPY pyproject.toml ./
COPY docker/requirements.py docker/
RUN --mount=type=cache,target=/root/.cache/pip \
    python3 -m venv /opt/venv \
 && python3 docker/requirements.py sample >/tmp/requirements.txt \
 && /opt/venv/bin/pip install --disable-pip-version-check -r /tmp/requirements.txt
COPY README.md ./
COPY mpstream/ mpstream/
COPY encoder/ encoder/
COPY manifests/ manifests/
COPY netem/ netem/
COPY player/ player/
COPY runner/ runner/
COPY server/ server/
RUN /opt/venv/bin/pip install --disable-pip-version-check --no-cache-dir --no-deps -e .
ENV PATH=/opt/venv/bin:$PATH

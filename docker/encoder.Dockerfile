# The encoder job: writes a media tree into the shared volume, then exits.
# Build context: the repository root.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ffmpeg \
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
RUN python3 -m venv /opt/venv && /opt/venv/bin/pip install --no-cache-dir -e '.[dev]'
ENV PATH=/opt/venv/bin:$PATH

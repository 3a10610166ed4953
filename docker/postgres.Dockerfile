# PostgreSQL for the QoE collector, from Debian's package (the same major version the test suite
# runs against). Build context: the repository root. BASE_IMAGE: any Debian 12 image.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# No cluster from the package's install script: the entry point makes one in the data volume.
RUN mkdir -p /etc/postgresql-common/createcluster.d \
 && echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/no-main.conf \
 && apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/*
COPY docker/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["postgres-entrypoint"]
CMD ["postgres", "-c", "listen_addresses=*"]

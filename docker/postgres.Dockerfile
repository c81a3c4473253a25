# PostgreSQL 15 with the database-side tools the native test suite uses: pgTAP, pg_prove and
# sqitch. They are the Debian packages scripts/setup installs on a machine, so the compose
# deploy and the compose pgTAP run use the same versions as scripts/test.
FROM postgres:15-bookworm

RUN apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        postgresql-15-pgtap \
        libtap-parser-sourcehandler-pgtap-perl \
        sqitch \
        libdbd-pg-perl \
    && rm -rf /var/lib/apt/lists/*

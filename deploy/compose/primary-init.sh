#!/bin/sh
# The primary's first start (docker-entrypoint-initdb.d, as the image's
# superuser, in the database iot): the iot data set, the least-privileged
# roles (the login lakegate, the SELECT-only lakegate_reader), the login's
# password and the cluster database it owns, and a replication role for
# the standby.
set -eu
sql="${SQL_DIR:-/lakegate}" # where compose.yaml mounts the SQL files
psql="psql -v ON_ERROR_STOP=1 --no-psqlrc -q --username $POSTGRES_USER --dbname $POSTGRES_DB"
echo "primary-init: loading ${CLUSTER_ROWS} readings into iot"
$psql -v rows="$CLUSTER_ROWS" -f "$sql/iot.sql"
$psql -v password="$LOGIN_PASSWORD" -v cluster_db=lakegate_cluster -f "$sql/roles.sql" -f "$sql/login.sql"
$psql -v password="$REPLICATION_PASSWORD" <<'SQL'
CREATE ROLE replicator REPLICATION LOGIN PASSWORD :'password';
SQL
echo "host replication replicator all scram-sha-256" >>"$PGDATA/pg_hba.conf"

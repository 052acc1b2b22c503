-- The least-privileged roles lakegate serves a PostgreSQL database through
-- (README: Point it at PostgreSQL): a login that is no superuser and owns
-- no served table, and a NOLOGIN role holding SELECT only, which callers'
-- SQL runs as (query_role). Run it as the tables' owner in the served
-- database; the roles are made once per server.
SELECT pg_advisory_lock(hashtext('lakegate roles'));
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lakegate') AS missing \gset
\if :missing
CREATE ROLE lakegate LOGIN;
\endif
SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'lakegate_reader') AS missing \gset
\if :missing
CREATE ROLE lakegate_reader NOLOGIN;
\endif
GRANT lakegate_reader TO lakegate;
SELECT pg_advisory_unlock(hashtext('lakegate roles'));
GRANT SELECT ON ALL TABLES IN SCHEMA public TO lakegate_reader;
GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA public TO lakegate;
GRANT CREATE ON SCHEMA public TO lakegate;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO lakegate_reader;

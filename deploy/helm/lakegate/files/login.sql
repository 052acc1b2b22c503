-- After roles.sql (the same as integration/testdata/roles.sql): the login
-- role's password, and the database the replicas share state through
-- (cluster_dsn), owned by the login role so that it may create its tables
-- there. No served role reads that database. Run by the tables' owner or
-- a superuser, with psql variables password and cluster_db.
ALTER ROLE lakegate PASSWORD :'password';
SELECT format('CREATE DATABASE %I OWNER lakegate', :'cluster_db')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'cluster_db') \gexec

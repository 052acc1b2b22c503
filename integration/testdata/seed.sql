-- Seed for the integration tests: the IoT shape of the benchmark data set,
-- small and deterministic.
DROP TABLE IF EXISTS readings;
DROP TABLE IF EXISTS devices;
CREATE TABLE devices (
  id        integer PRIMARY KEY,
  name      text NOT NULL,
  site      text NOT NULL,
  kind      text NOT NULL,
  installed date NOT NULL,
  active    boolean NOT NULL
);
INSERT INTO devices
SELECT g, 'dev-' || lpad(g::text, 4, '0'),
       (ARRAY['berlin','lisbon','oslo','austin','osaka','lagos','lima','perth'])[1 + g % 8],
       (ARRAY['thermo','hygro','power','flow'])[1 + (g / 8) % 4],
       date '2020-01-01' + (g * 37) % 1500,
       g % 11 <> 0
FROM generate_series(1, 50) g;
CREATE TABLE readings (
  id          bigint PRIMARY KEY,
  device_id   integer NOT NULL REFERENCES devices(id),
  ts          timestamptz NOT NULL,
  temperature double precision NOT NULL,
  humidity    double precision NOT NULL,
  power_w     numeric(10,2),
  status      text NOT NULL,
  note        text
);
INSERT INTO readings
SELECT g, 1 + g % 50,
       timestamptz '2025-01-01 00:00:00+00' + (g::integer * interval '3 seconds'),
       15 + ((g * 7919) % 2000) / 100.0,
       30 + ((g * 104729) % 5000) / 100.0,
       CASE WHEN g % 13 = 0 THEN NULL ELSE ((g * 31) % 100000) / 100.0 END,
       (ARRAY['ok','ok','ok','ok','warn','fail'])[1 + g % 6],
       CASE WHEN g % 97 = 0 THEN 'maintenance window ' || (g % 7) ELSE NULL END
FROM generate_series(1::bigint, 5000) g;
CREATE INDEX readings_device_ts ON readings (device_id, ts);
ANALYZE devices;
ANALYZE readings;

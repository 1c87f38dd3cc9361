-- Schema 28 to 29 (pg-boss 12.11): the warnings pg-boss keeps (persistWarnings). Frozen.
CREATE TABLE {{schema}}.warning (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  type text NOT NULL,
  message text NOT NULL,
  data jsonb,
  created_on timestamp with time zone NOT NULL DEFAULT now()
);
CREATE INDEX warning_i1 ON {{schema}}.warning (created_on DESC);
UPDATE {{schema}}.version SET version = 29;

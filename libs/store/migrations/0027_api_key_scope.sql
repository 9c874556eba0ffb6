-- What a key may do: 'api' (everything: the REST API, MCP, and sending spans) or 'ingest'
-- (sending spans, the notes and halts of its runs, pre-call checks: what an agent needs, and
-- nothing of the API). Every key made before this is 'api', as it could do everything then.
ALTER TABLE api_keys ADD COLUMN scope text NOT NULL DEFAULT 'api' CHECK (scope IN ('api', 'ingest'));

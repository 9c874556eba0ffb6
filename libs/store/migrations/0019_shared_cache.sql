-- The embedded default's shared cache (the SharedCache port): the question service's model
-- answers kept in its database, so the process started again after a crash or a restart is
-- answered from here instead of asking the model what it had already been answered. The
-- distributed deployment keeps these in Redis and never writes this table.
--
-- `key` is the sha1 of the question's cache key (questions, second looks and decisions are
-- kept apart by `name` and by the key's own prefix); `expires_at` is the writer's clock in
-- milliseconds (one process reads what it wrote). Rows past it are misses, deleted by the
-- writer from time to time.
CREATE TABLE shared_cache (
  name text NOT NULL,
  key text NOT NULL,
  value text NOT NULL,
  expires_at bigint NOT NULL,
  PRIMARY KEY (name, key)
);
CREATE INDEX shared_cache_expiry ON shared_cache (expires_at);

-- A workspace's GitHub repository connection: where suggestions become pull requests. The
-- token is kept only encrypted (AES-256-GCM under NEATROOTS_SECRET_KEY: version byte, nonce,
-- tag, ciphertext); reads give its last four characters, never the token.
CREATE TABLE sop_repo_connections (
  workspace        text PRIMARY KEY REFERENCES projects (name) ON DELETE CASCADE,
  owner            text NOT NULL,
  repo             text NOT NULL,
  branch           text NOT NULL,
  folder           text NOT NULL,
  api_url          text NOT NULL,
  token_encrypted  bytea NOT NULL,
  token_last4      text NOT NULL,
  updated_at       timestamptz NOT NULL DEFAULT now()
);

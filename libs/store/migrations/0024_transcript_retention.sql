-- Transcript retention (NEATROOTS_TRANSCRIPT_RETENTION_DAYS): when the hourly pass emptied a
-- checked session's turns and tool calls. Its checks, findings and their quoted evidence stay.
ALTER TABLE sop_sessions ADD COLUMN IF NOT EXISTS transcript_expired_at timestamptz;
-- The sessions whose transcript is still kept, by receipt: the pass reads the oldest of them.
CREATE INDEX IF NOT EXISTS sop_sessions_transcripts ON sop_sessions (received_at) WHERE transcript_expired_at IS NULL;

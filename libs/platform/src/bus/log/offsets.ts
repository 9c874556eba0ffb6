import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The consumer groups' positions, one small JSON file written whole: a temporary file,
 * fsync'ed, renamed over the old one (a crash leaves one or the other, never half of each).
 * Saved after processing, at most every `commitIntervalMs`: a crash replays what was
 * processed since (at-least-once; the consumers are idempotent).
 */
export interface OffsetsFile {
  version: 1;
  partitions: number;
  /** topic -> group -> next offset to process, per partition. */
  groups: Record<string, Record<string, number[]>>;
}

export function readOffsets(dir: string, partitions: number): OffsetsFile {
  const file = path.join(dir, 'offsets.json');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, partitions, groups: {} };
    throw e;
  }
  let parsed: OffsetsFile;
  try {
    parsed = JSON.parse(text) as OffsetsFile;
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message}); the log's consumer positions are unreadable`);
  }
  if (parsed.version !== 1 || typeof parsed.groups !== 'object' || parsed.groups === null) {
    throw new Error(`${file}: not a version 1 offsets file`);
  }
  if (parsed.partitions !== partitions) {
    // Keys would land on other partitions than their earlier records: a run's order breaks.
    throw new Error(`${file}: the log in ${dir} has ${parsed.partitions} partitions, configured ${partitions}; use the same count or another folder`);
  }
  return parsed;
}

export async function writeOffsets(dir: string, content: OffsetsFile): Promise<void> {
  const file = path.join(dir, 'offsets.json');
  const tmp = `${file}.tmp`;
  const fh = await fs.promises.open(tmp, 'w');
  try {
    await fh.writeFile(JSON.stringify(content));
    await fh.sync();
  } finally {
    await fh.close();
  }
  await fs.promises.rename(tmp, file);
}


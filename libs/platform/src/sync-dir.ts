import * as fs from 'node:fs';

/**
 * A folder's entries on disk: after a file is created, renamed or removed in it, only a sync of
 * the folder itself makes that survive a crash (the durable log's segments, the window
 * journals and their snapshots, the bus's saved positions).
 */
export async function syncDirAsync(dir: string): Promise<void> {
  const h = await fs.promises.open(dir, 'r');
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

/** The same, blocking: for starts and closes, never on a path that serves traffic. */
export function syncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

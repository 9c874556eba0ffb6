import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseSecretKey, type Config } from '../config';

/**
 * The key secrets are encrypted with at rest: NEATROOTS_SECRET_KEY, or (the embedded default)
 * one made once and kept 0600 in the data folder, like the demo API key, so a restart can
 * still read what it stored. A file that is not a key stops the start, naming the file:
 * replacing it silently would make every stored token unreadable.
 */
export function secretKeyOf(config: Pick<Config, 'NEATROOTS_SECRET_KEY' | 'dataDir'>): Buffer {
  if (config.NEATROOTS_SECRET_KEY) return config.NEATROOTS_SECRET_KEY;
  const file = path.join(config.dataDir, 'secret-key');
  let text: string | undefined;
  try {
    text = fs.readFileSync(file, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text !== undefined) {
    const key = parseSecretKey(text);
    if (!key) throw new Error(`${file}: not a secret key (expected 64 hex digits); restore it, or set NEATROOTS_SECRET_KEY`);
    return key;
  }
  const key = randomBytes(32);
  fs.mkdirSync(config.dataDir, { recursive: true });
  fs.writeFileSync(file, `${key.toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  return key;
}

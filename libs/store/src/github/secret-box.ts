import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const VERSION = 1;

/** A stored secret that the configured key does not open (another key, or altered bytes). */
export class SecretKeyError extends Error {
  constructor(what: string) {
    super(`${what} cannot be decrypted with this NEATROOTS_SECRET_KEY (it was stored under another key, or altered); set the key it was stored with, or store it again`);
    this.name = 'SecretKeyError';
  }
}

/**
 * AES-256-GCM for secrets at rest: a fresh 12-byte nonce each time, and the tag checked on
 * opening, so a wrong key is an error rather than garbage. Layout: version, nonce, tag, data.
 */
export class SecretBox {
  constructor(private readonly key: Buffer) {
    if (key.length !== 32) throw new Error(`secret key: expected 32 bytes, got ${key.length}`);
  }

  seal(plain: string): Buffer {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    const data = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return Buffer.concat([Buffer.from([VERSION]), iv, c.getAuthTag(), data]);
  }

  /** `what` names the secret in the error (e.g. "the GitHub token of workspace acme"). */
  open(sealed: Uint8Array, what: string): string {
    const b = Buffer.from(sealed);
    if (b.length < 29 || b[0] !== VERSION) throw new SecretKeyError(what);
    try {
      const d = createDecipheriv('aes-256-gcm', this.key, b.subarray(1, 13));
      d.setAuthTag(b.subarray(13, 29));
      return Buffer.concat([d.update(b.subarray(29)), d.final()]).toString('utf8');
    } catch {
      throw new SecretKeyError(what);
    }
  }
}

import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';

/**
 * One HTTP exchange for the CLI's API client, on node:http rather than the global fetch.
 * Why: Node's fetch (undici) gives up on an answer whose headers take more than 5 minutes
 * (headersTimeout), and the API answers a recluster only when it is done (up to 10 minutes of
 * model calls). Node's own client has no such limit, so the wait is exactly `waitMs`: the
 * whole exchange, from connecting to the last byte of the answer.
 */
export interface Sent {
  status: number;
  text: string;
}

export class SendTimeout extends Error {
  constructor(readonly waitMs: number) {
    super(`no answer within ${waitMs >= 60_000 ? `${Math.round(waitMs / 60_000)} minutes` : waitMs >= 1_000 ? `${Math.round(waitMs / 1_000)} s` : `${waitMs} ms`}`);
    this.name = 'SendTimeout';
  }
}

export function send(url: string, opts: { method: string; headers: Record<string, string>; body?: string; waitMs: number }): Promise<Sent> {
  const u = new URL(url);
  const request = u.protocol === 'https:' ? httpsRequest : httpRequest;
  const body = opts.body === undefined ? undefined : Buffer.from(opts.body, 'utf8');
  return new Promise<Sent>((resolve, reject) => {
    const req = request(u, { method: opts.method, headers: { ...opts.headers, ...(body ? { 'content-length': String(body.length) } : {}) } });
    const timer = setTimeout(() => req.destroy(new SendTimeout(opts.waitMs)), opts.waitMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      reject(err);
    };
    req.on('error', fail);
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', fail);
      res.on('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.end(body);
  });
}

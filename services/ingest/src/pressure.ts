import { Metadata, status as Status } from '@grpc/grpc-js';

/**
 * Back-pressure at the edge. Acknowledging more than the pipeline can work through only moves
 * the queue into memory (and, on a crash, into the list of what was lost), so ingest refuses
 * an export with RESOURCE_EXHAUSTED while
 *
 * - the bus's backlog (records of the events topic its slowest consumer group has not
 *   processed) is past `maxBacklog`, or
 * - the process's resident memory is past 90% of `memoryCeilingBytes` (sampled every
 *   `sampleMs`; the margin is for what the exports already in flight still bring).
 *
 * The refusal carries google.rpc.RetryInfo, which is what makes OTLP exporters retry a
 * RESOURCE_EXHAUSTED (with their backoff) instead of dropping the data; the agent SDK retries it too.
 */
export interface PressureOptions {
  backlog?: () => number;
  maxBacklog?: number;
  memoryCeilingBytes?: number;
  /** Resident set size now (tests give their own). Default process.memoryUsage.rss. */
  rss?: () => number;
  sampleMs?: number;
  /** What the refusal asks clients to wait. Default 1 s. */
  retryAfterMs?: number;
}

export type PressureReason = 'backlog' | 'memory';

export interface Refusal {
  reason: PressureReason;
  message: string;
}

export class Pressure {
  private rssNow = 0;
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly rss: () => number;

  constructor(private readonly opts: PressureOptions) {
    this.rss = opts.rss ?? (() => process.memoryUsage.rss());
    if (opts.memoryCeilingBytes) {
      this.rssNow = this.rss();
      this.timer = setInterval(() => (this.rssNow = this.rss()), opts.sampleMs ?? 100);
      this.timer.unref();
    }
  }

  /** Why an export must be refused now, or undefined. */
  check(): Refusal | undefined {
    const { maxBacklog, backlog, memoryCeilingBytes } = this.opts;
    if (maxBacklog !== undefined && backlog) {
      const n = backlog();
      if (n > maxBacklog) {
        return { reason: 'backlog', message: `ingest is behind: ${n} records wait to be processed (bound ${maxBacklog}, NEATROOTS_MAX_BACKLOG); retry later` };
      }
    }
    if (memoryCeilingBytes && this.rssNow > memoryCeilingBytes * 0.9) {
      const mb = (b: number) => Math.round(b / 1048576);
      return {
        reason: 'memory',
        message: `ingest is near its memory ceiling (${mb(this.rssNow)} MB of ${mb(memoryCeilingBytes)} MB, NEATROOTS_MEMORY_CEILING_MB); retry later`,
      };
    }
    return undefined;
  }

  /** Trailers of a refusal: grpc-status-details-bin with google.rpc.RetryInfo. */
  trailers(message: string): Metadata {
    const md = new Metadata();
    md.set('grpc-status-details-bin', retryStatus(Status.RESOURCE_EXHAUSTED, message, this.opts.retryAfterMs ?? 1000));
    return md;
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
  }
}

// ---- google.rpc.Status { code, message, details: [Any(RetryInfo)] }, encoded by hand (three small messages) ----

function varint(n: number): number[] {
  const out: number[] = [];
  while (n > 127) {
    out.push((n & 127) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function field(no: number, bytes: Uint8Array | number[]): number[] {
  return [...varint((no << 3) | 2), ...varint(bytes.length), ...bytes];
}

function varintField(no: number, n: number): number[] {
  return [...varint(no << 3), ...varint(n)];
}

export function retryStatus(code: number, message: string, retryAfterMs: number): Buffer {
  const seconds = Math.floor(retryAfterMs / 1000);
  const nanos = (retryAfterMs % 1000) * 1_000_000;
  const duration = [...(seconds ? varintField(1, seconds) : []), ...(nanos ? varintField(2, nanos) : [])];
  const retryInfo = field(1, duration);
  const any = [...field(1, Buffer.from('type.googleapis.com/google.rpc.RetryInfo')), ...field(2, retryInfo)];
  return Buffer.from([...varintField(1, code), ...field(2, Buffer.from(message)), ...field(3, any)]);
}

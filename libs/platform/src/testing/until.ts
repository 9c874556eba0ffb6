/**
 * Polls `fn` until it gives something other than undefined or false, and answers that; after
 * `ms` it throws, naming `what` it waited for (a test's wait on another process or service).
 */
export async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 90_000, everyMs = 100): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** What `p` resolves to, or a failure once `ms` passed, naming `what`: a stop that hangs fails a test in bounded time. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

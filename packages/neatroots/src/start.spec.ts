import { servedUntil } from './start';

const never = new Promise<never>(() => undefined);

describe('neatroots start, once serving', () => {
  it('NEATROOTS_ON_FAILING=exit: a part that stopped for good (a disk error) stops it, exit 1, saying why', async () => {
    const said: string[] = [];
    const code = await servedUntil(never, Promise.resolve('the bus log cannot be written (ENOSPC: no space left on device, write)'), 'exit', { err: (l) => void said.push(l) });
    expect(code).toBe(1);
    expect(said).toEqual(['neatroots start: the bus log cannot be written (ENOSPC: no space left on device, write): stopping, to exit 1 (NEATROOTS_ON_FAILING=exit)']);
  });

  it('stay (the default): it keeps serving after such a failure until a signal, then exits 0', async () => {
    let signal!: () => void;
    const stopped = new Promise<void>((r) => (signal = r));
    let code: number | undefined;
    const serving = servedUntil(stopped, Promise.resolve('the bus log cannot be written (ENOSPC)'), 'stay', { err: () => undefined }).then((c) => (code = c));
    await new Promise((r) => setTimeout(r, 50));
    expect(code).toBeUndefined();
    signal();
    await serving;
    expect(code).toBe(0);
  });
});

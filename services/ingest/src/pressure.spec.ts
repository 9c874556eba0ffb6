import { DEFAULT_MEMORY_CEILING_MB, memoryCeilingMb } from './pressure';

describe('the memory ceiling in effect (memoryCeilingMb)', () => {
  const MiB = 1048576;

  it('is the setting when one is given, 0 included (off), whatever the container allows', () => {
    expect(memoryCeilingMb(2048, 512 * MiB)).toEqual({ mb: 2048, from: 'setting' });
    expect(memoryCeilingMb(0, 512 * MiB)).toEqual({ mb: 0, from: 'setting' });
  });

  it('unset, is a container memory limit lower than the default: a 512 MiB pod refuses before it is killed', () => {
    expect(memoryCeilingMb(undefined, 512 * MiB)).toEqual({ mb: 512, from: 'container' });
    expect(memoryCeilingMb(undefined, 768 * MiB + 5)).toEqual({ mb: 768, from: 'container' });
  });

  it('unset, is the default under no limit, a limit above the default, or the "no limit" cgroups write', () => {
    expect(DEFAULT_MEMORY_CEILING_MB).toBe(1024);
    for (const c of [undefined, 0, 4096 * MiB, 9223372036854771712, 18446744073709552000, Infinity, NaN]) {
      expect(memoryCeilingMb(undefined, c)).toEqual({ mb: 1024, from: 'default' });
    }
  });
});

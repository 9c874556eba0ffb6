import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { cgroupMemory, DEFAULT_MEMORY_CEILING_MB, memoryCeilingMb, Pressure } from './pressure';

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

/** A cgroup folder as the kernel shows it, written by the test (/proc/self/cgroup beside it). */
function fakeCgroups(files: Record<string, string>): { root: string; self: string; write(rel: string, text: string): void; done(): void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-cgroup-'));
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };
  for (const [rel, text] of Object.entries(files)) write(rel, text);
  return { root: path.join(dir, 'sys'), self: path.join(dir, 'proc-self-cgroup'), write, done: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

describe("the container's memory in use (cgroupMemory), what a ceiling from the container's limit is compared with", () => {
  const MiB = 1048576;
  const stat = (inactive: number, key = 'inactive_file') => `anon 1\nfile 2\nactive_file 4096\n${key} ${inactive}\ninactive_anon 8192\n`;

  it('cgroup v2: memory.current less inactive_file, of the cgroup /proc/self/cgroup names, read anew each time', () => {
    const cg = fakeCgroups({
      'proc-self-cgroup': '0::/kubepods/pod1/ingest\n',
      'sys/kubepods/pod1/ingest/memory.current': `${500 * MiB}\n`,
      'sys/kubepods/pod1/ingest/memory.max': `${512 * MiB}\n`,
      'sys/kubepods/pod1/ingest/memory.stat': stat(60 * MiB),
      'sys/memory.current': `${4000 * MiB}\n`,
    });
    try {
      const read = cgroupMemory(512 * MiB, { root: cg.root, self: cg.self })!;
      expect(read()).toBe(440 * MiB);
      cg.write('sys/kubepods/pod1/ingest/memory.current', `${300 * MiB}\n`);
      expect(read()).toBe(240 * MiB);
    } finally {
      cg.done();
    }
  });

  it("cgroup v2 in its own namespace (0::/): the mount's root", () => {
    const cg = fakeCgroups({ 'proc-self-cgroup': '0::/\n', 'sys/memory.current': `${200 * MiB}\n`, 'sys/memory.max': `${512 * MiB}\n`, 'sys/memory.stat': stat(0) });
    try {
      expect(cgroupMemory(512 * MiB, { root: cg.root, self: cg.self })!()).toBe(200 * MiB);
    } finally {
      cg.done();
    }
  });

  it("cgroup v1: memory.usage_in_bytes less total_inactive_file, at the mount's root when the host's path is not mounted in the container", () => {
    const cg = fakeCgroups({
      'proc-self-cgroup': '12:pids:/kubepods/x\n4:memory:/kubepods/burstable/pod1/abc\n0::/\n',
      'sys/memory/memory.usage_in_bytes': `${480 * MiB}\n`,
      'sys/memory/memory.limit_in_bytes': `${512 * MiB}\n`,
      'sys/memory/memory.stat': `inactive_file ${5 * MiB}\n${stat(30 * MiB, 'total_inactive_file')}`,
    });
    try {
      expect(cgroupMemory(512 * MiB, { root: cg.root, self: cg.self })!()).toBe(450 * MiB);
    } finally {
      cg.done();
    }
  });

  it('of the cgroups it could read, the one whose limit the ceiling came from', () => {
    const cg = fakeCgroups({
      'proc-self-cgroup': '0::/a/b\n',
      'sys/a/b/memory.current': `${100 * MiB}\n`,
      'sys/a/b/memory.max': 'max\n',
      'sys/memory.current': `${400 * MiB}\n`,
      'sys/memory.max': `${512 * MiB}\n`,
    });
    try {
      expect(cgroupMemory(512 * MiB, { root: cg.root, self: cg.self })!()).toBe(400 * MiB);
      expect(cgroupMemory(undefined, { root: cg.root, self: cg.self })!()).toBe(100 * MiB);
    } finally {
      cg.done();
    }
  });

  it('none where no usage can be read; undefined while its files cannot be read', () => {
    const cg = fakeCgroups({ 'proc-self-cgroup': '0::/\n', 'sys/memory.current': `${100 * MiB}\n` });
    try {
      expect(cgroupMemory(undefined, { root: path.join(cg.root, 'none'), self: cg.self })).toBeUndefined();
      expect(cgroupMemory(undefined, { root: cg.root, self: path.join(cg.root, 'no-such-file') })).toBeUndefined();
      const read = cgroupMemory(undefined, { root: cg.root, self: cg.self })!;
      expect(read()).toBe(100 * MiB);
      fs.rmSync(path.join(cg.root, 'memory.current'));
      expect(read()).toBeUndefined();
    } finally {
      cg.done();
    }
  });

  it('a 512 MiB pod: refuses once the container (server and launcher) passes 90%, though the server alone is under it; the process memory while the cgroup cannot be read', async () => {
    const cg = fakeCgroups({ 'proc-self-cgroup': '0::/\n', 'sys/memory.current': `${400 * MiB}\n`, 'sys/memory.max': `${512 * MiB}\n`, 'sys/memory.stat': stat(0) });
    const serverRss = 440 * MiB; // under 90% of 512 MiB (460.8): what the process alone shows
    const p = new Pressure({ memoryCeilingBytes: 512 * MiB, rss: () => serverRss, container: cgroupMemory(512 * MiB, { root: cg.root, self: cg.self }), sampleMs: 5, collect: null });
    const later = () => new Promise((r) => setTimeout(r, 30));
    try {
      expect(p.check()).toBeUndefined();
      cg.write('sys/memory.current', `${(440 + 42 + 6) * MiB}\n`); // the launcher's 42 MB and the rest of the container
      await later();
      expect(p.check()).toEqual({ reason: 'memory', message: 'ingest is near its memory ceiling (its container uses 488 MB of 512 MB, NEATROOTS_MEMORY_CEILING_MB); retry later' });
      cg.write('sys/memory.stat', stat(40 * MiB)); // page cache the kernel drops first: not counted
      await later();
      expect(p.check()).toBeUndefined();
      fs.rmSync(path.join(cg.root, 'memory.current'));
      await later();
      expect(p.check()).toBeUndefined(); // 440 MB: the process's own
    } finally {
      p.close();
      cg.done();
    }
  });
});

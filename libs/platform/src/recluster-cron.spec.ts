import { loadConfig } from './config';

describe('SOPOPS_RECLUSTER_CRON', () => {
  it('reclusters daily at 06:00 UTC unless told otherwise; a bad pattern names the variable', () => {
    expect(loadConfig({}).SOPOPS_RECLUSTER_CRON).toBe('0 6 * * *');
    expect(loadConfig({ SOPOPS_RECLUSTER_CRON: '30 2 * * 1' }).SOPOPS_RECLUSTER_CRON).toBe('30 2 * * 1');
    expect(() => loadConfig({ SOPOPS_RECLUSTER_CRON: 'daily' })).toThrow(/SOPOPS_RECLUSTER_CRON: cron pattern "daily" must have five fields/);
    expect(() => loadConfig({ SOPOPS_RECLUSTER_CRON: '0 24 * * *' })).toThrow(/SOPOPS_RECLUSTER_CRON: cron pattern "0 24 \* \* \*"/);
  });
});

describe('span retention settings', () => {
  it('keeps spans 30 days and runs hourly unless told otherwise; a bad value names the variable', () => {
    const c = loadConfig({});
    expect([c.NEATROOTS_SPAN_RETENTION_DAYS, c.NEATROOTS_RETENTION_CRON]).toEqual([30, '23 * * * *']);
    expect(loadConfig({ NEATROOTS_SPAN_RETENTION_DAYS: '0' }).NEATROOTS_SPAN_RETENTION_DAYS).toBe(0);
    expect(loadConfig({ NEATROOTS_SPAN_RETENTION_DAYS: '7.5' }).NEATROOTS_SPAN_RETENTION_DAYS).toBe(7.5);
    expect(() => loadConfig({ NEATROOTS_SPAN_RETENTION_DAYS: '-1' })).toThrow(/NEATROOTS_SPAN_RETENTION_DAYS/);
    expect(() => loadConfig({ NEATROOTS_SPAN_RETENTION_DAYS: 'forever' })).toThrow(/NEATROOTS_SPAN_RETENTION_DAYS/);
    expect(() => loadConfig({ NEATROOTS_RETENTION_CRON: 'hourly' })).toThrow(/NEATROOTS_RETENTION_CRON: cron pattern "hourly" must have five fields/);
  });

  it('keeps every SOP transcript unless told a number of days', () => {
    expect(loadConfig({}).NEATROOTS_TRANSCRIPT_RETENTION_DAYS).toBe(0);
    expect(loadConfig({ NEATROOTS_TRANSCRIPT_RETENTION_DAYS: '90' }).NEATROOTS_TRANSCRIPT_RETENTION_DAYS).toBe(90);
    expect(() => loadConfig({ NEATROOTS_TRANSCRIPT_RETENTION_DAYS: '-3' })).toThrow(/NEATROOTS_TRANSCRIPT_RETENTION_DAYS/);
  });
});

describe('NEATROOTS_API_KEYS', () => {
  const message = (env: NodeJS.ProcessEnv) => {
    try {
      loadConfig(env);
      return 'accepted';
    } catch (e) {
      return (e as Error).message;
    }
  };

  it('reads project=key pairs', () => {
    expect(loadConfig({ NEATROOTS_API_KEYS: 'alpha=k1, beta=k2' }).NEATROOTS_API_KEYS).toEqual([{ project: 'alpha', key: 'k1' }, { project: 'beta', key: 'k2' }]);
  });

  it('names a malformed entry by its place, never its text (a key in it would reach the logs)', () => {
    const m = message({ NEATROOTS_API_KEYS: 'beta=k2,alpha:s3cr3t-key-123' });
    expect(m).toMatch(/NEATROOTS_API_KEYS: entry 2 of 2 is not project=key/);
    expect(m).not.toContain('s3cr3t');
  });

  it('reads a key\'s scope after its last colon: ingest for agents, api (the default) for everything', () => {
    expect(loadConfig({ NEATROOTS_API_KEYS: 'shop=agent-key:ingest,shop=ops-key,other=k:with:colons:api,a:b=k3' }).NEATROOTS_API_KEYS).toEqual([
      { project: 'shop', key: 'agent-key', scope: 'ingest' },
      { project: 'shop', key: 'ops-key' },
      { project: 'other', key: 'k:with:colons', scope: 'api' },
      { project: 'a:b', key: 'k3' },
    ]);
  });

  it('refuses an unknown scope, naming the entry and its project but nothing after the colon (it may be part of a key)', () => {
    const m = message({ NEATROOTS_API_KEYS: 'shop=agent-key:ingest,beta=k2:Ingest-s3cr3t' });
    expect(m).toMatch(/NEATROOTS_API_KEYS: entry 2 of 2 \(beta\) has an unknown scope: the text after a key's last ':' is its scope, ingest or api/);
    expect(m).not.toContain('s3cr3t');
    expect(message({ NEATROOTS_API_KEYS: 'beta=k2:' })).toMatch(/entry 1 of 1 \(beta\) has an unknown scope/);
    expect(message({ NEATROOTS_API_KEYS: 'beta=:ingest' })).toMatch(/entry 1 of 1 is not project=key/);
  });

  it('reads none as no keys said on purpose, unlike an empty setting; none is no entry among others', () => {
    const none = loadConfig({ NEATROOTS_API_KEYS: ' none ' }).NEATROOTS_API_KEYS;
    expect([[...none], none.none]).toEqual([[], true]);
    for (const empty of [{}, { NEATROOTS_API_KEYS: '' }]) expect(loadConfig(empty).NEATROOTS_API_KEYS.none).toBeUndefined();
    expect(message({ NEATROOTS_API_KEYS: 'none,shop=k1' })).toMatch(/NEATROOTS_API_KEYS: entry 1 of 2 is not project=key/);
  });

  it('refuses a key listed twice (one key opens one project), naming the entries and not the key', () => {
    const m = message({ NEATROOTS_API_KEYS: 'alpha=shared-key-99,beta=k2,gamma=shared-key-99' });
    expect(m).toMatch(/NEATROOTS_API_KEYS: entries 1 \(alpha\) and 3 \(gamma\) have the same key/);
    expect(m).not.toContain('shared-key-99');
  });
});

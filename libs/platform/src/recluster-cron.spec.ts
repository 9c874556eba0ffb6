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

import { loadConfig } from './config';

describe('SOPOPS_RECLUSTER_CRON', () => {
  it('reclusters daily at 06:00 UTC unless told otherwise; a bad pattern names the variable', () => {
    expect(loadConfig({}).SOPOPS_RECLUSTER_CRON).toBe('0 6 * * *');
    expect(loadConfig({ SOPOPS_RECLUSTER_CRON: '30 2 * * 1' }).SOPOPS_RECLUSTER_CRON).toBe('30 2 * * 1');
    expect(() => loadConfig({ SOPOPS_RECLUSTER_CRON: 'daily' })).toThrow(/SOPOPS_RECLUSTER_CRON: cron pattern "daily" must have five fields/);
    expect(() => loadConfig({ SOPOPS_RECLUSTER_CRON: '0 24 * * *' })).toThrow(/SOPOPS_RECLUSTER_CRON: cron pattern "0 24 \* \* \*"/);
  });
});

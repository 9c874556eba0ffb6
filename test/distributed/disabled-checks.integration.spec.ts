import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { credentials, Metadata } from '@grpc/grpc-js';
import { requireService, until } from '@neatroots/platform';
import { v1 } from '@neatroots/proto';
import { itemToEvent } from '@neatroots/spans';
import { Cluster, type ServiceProc } from './cluster';

/**
 * A check disabled for a slow pattern, as a user of the distributed deployment sees it: the rule
 * engine runs on another machine than the api (here: another home folder, so nothing passes
 * through the files a neatroots on one machine shares), and GET .../checks/disabled (the web
 * app's Checks page) still lists it, from the deployment's Redis; once that rule engine stops,
 * the list is empty again ("until neatroots restarts").
 */
const SUITE = 'distributed: checks disabled for a slow pattern';
const kafka = requireService('kafka', SUITE);
const redis = requireService('redis', SUITE);
const pg = requireService('postgres', SUITE);
const maybe = kafka && redis && pg ? describe : describe.skip;

const PROJECT = `slow-${Date.now().toString(36)}`;
const KEY = `key-${PROJECT}`;
/** About 1,950 RE2 instructions (under the 2,000 bound) yet ~200 ms on a 200,000-character text: over the 50 ms limit. */
const SLOW = `id: slow-letters\nkind: rule\ntitle: letters then z\nrule:\n  type: match\n  span: {}\n  pattern: '\\p{L}{1,30}z'\n  in: [output]\naction: flag\n`;

maybe(SUITE, () => {
  let cluster: Cluster;
  let engine: ServiceProc;
  let engineHome: string;
  let client: v1.IngestClient;

  beforeAll(async () => {
    cluster = new Cluster({ kafka: kafka!, redis: redis!, pg: pg! }, { NEATROOTS_API_KEYS: `${PROJECT}=${KEY}` });
    await cluster.init();
    engineHome = fs.mkdtempSync(path.join(os.tmpdir(), 'neatroots-engine-home-'));
    fs.mkdirSync(path.join(engineHome, 'checks'));
    fs.writeFileSync(path.join(engineHome, 'checks', 'mine.yaml'), SLOW);
    await cluster.start('review');
    [engine] = await Promise.all([cluster.start('rule-engine', { NEATROOTS_HOME: engineHome }), cluster.start('ingest'), cluster.start('api')]);
    client = new v1.IngestClient(`127.0.0.1:${cluster.ports.grpc}`, credentials.createInsecure());
  }, 180_000);

  afterAll(async () => {
    client?.close();
    await cluster?.close();
    if (engineHome) fs.rmSync(engineHome, { recursive: true, force: true });
  }, 60_000);

  const disabled = async () => {
    const res = await fetch(`http://127.0.0.1:${cluster.ports.http}/v1/projects/${PROJECT}/checks/disabled`, { headers: { 'x-api-key': KEY } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { checks: { check_id: string; pattern: string; reason: string; ms: number; limit_ms: number; source?: string }[] }).checks;
  };

  it('lists the check a rule engine on another machine disabled, until that rule engine stops', async () => {
    expect(await disabled()).toEqual([]);
    const md = new Metadata();
    md.set('x-api-key', KEY);
    const output = 'a'.repeat(200_000);
    const events = [itemToEvent({ kind: 'span', span: { run_id: 'run-slow', span_id: 's1', type: 'tool', name: 'read_file', tool: 'read_file', status: 'ok', output } })];
    await new Promise<void>((resolve, reject) => client.export(v1.ExportRequest.fromPartial({ events }), md, (err) => (err ? reject(err) : resolve())));
    // The rule engine's own view first (its /metrics), then what the api answers.
    await until('the rule engine to disable the check', async () => (await (await fetch(`http://127.0.0.1:${engine.adminPort}/metrics`)).text()).includes('neatroots_checks_disabled{check_id="slow-letters"'), 60_000, 100);
    const [d] = await until('the api to list it', async () => {
      const list = await disabled();
      return list.length ? list : undefined;
    }, 30_000, 200);
    expect(d).toMatchObject({ check_id: 'slow-letters', pattern: '\\p{L}{1,30}z', limit_ms: 50 });
    expect(d.ms).toBeGreaterThanOrEqual(50);
    expect(d.reason).toMatch(/50 ms/);
    // A rule engine stopped takes its entry off: the list is empty at once, not after the entry's time.
    await cluster.stop(engine);
    expect(await disabled()).toEqual([]);
  }, 150_000);
});

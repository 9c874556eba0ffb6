/**
 * The chart's values for upgrading a release in steps (docs/deployment.md, Upgrading): each
 * service's own image tag (<service>.image.tag, falling back to image.tag), and
 * internalTokenRequired (NEATROOTS_INTERNAL_TOKEN_REQUIRED), also as the chart renders it by
 * itself on an upgrade from a release whose Secret holds no internal token. `helm template` has no
 * cluster to look the release's Secret up in, so that case renders a copy of the chart whose
 * neatroots.releaseSecret gives the Secret a chart before the internal token made. Skips without
 * helm (one line), fails in CI.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import * as YAML from 'yaml';
import { loadConfig } from '../../libs/platform/src/config';
import { findHelm, repoRoot, skipLine, toolsRequired } from './support';

const chart = path.join(repoRoot, 'helm/neatroots');

interface Obj {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  spec?: any;
  data?: Record<string, string>;
}

function render(helm: string, chartDir: string, args: string[] = []): Obj[] {
  const r = spawnSync(helm, ['template', 'nr', chartDir, '--namespace', 'neatroots', ...args], { encoding: 'utf8', cwd: repoRoot });
  if (r.status !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return YAML.parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Obj | null)
    .filter((o): o is Obj => Boolean(o));
}

/** Every service's environment: the ConfigMap and the chart's Secret. */
function envOf(objs: Obj[]): Record<string, string> {
  const cm = objs.find((o) => o.kind === 'ConfigMap' && o.data?.NEATROOTS_KAFKA_BROKERS);
  const secret = objs.find((o) => o.kind === 'Secret' && o.metadata.name === 'nr-neatroots');
  const decoded = Object.fromEntries(Object.entries(secret?.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  return { ...cm?.data, ...decoded };
}

/** A copy of the chart whose lookup of the release's Secret finds `secret` (what the cluster holds). */
function withReleaseSecret(secret: object, use: (chartDir: string) => void): void {
  const dir = mkdtempSync(path.join(tmpdir(), 'neatroots-upgrade-'));
  try {
    const copy = path.join(dir, 'neatroots');
    cpSync(chart, copy, { recursive: true });
    const helpers = path.join(copy, 'templates/_helpers.tpl');
    const text = readFileSync(helpers, 'utf8');
    const lookup = /(\{\{- define "neatroots\.releaseSecret" -\}\}\n)\{\{- lookup [^\n]*\n/;
    if (!lookup.test(text)) throw new Error('neatroots.releaseSecret in _helpers.tpl is not the one-line lookup this check stands in for');
    // the Secret's JSON as a Go template string literal
    writeFileSync(helpers, text.replace(lookup, (_all, define: string) => `${define}{{- ${JSON.stringify(JSON.stringify(secret))} }}\n`));
    use(copy);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const b64 = (s: string) => Buffer.from(s).toString('base64');

const helm = findHelm();
if (!helm) {
  if (toolsRequired()) throw new Error('helm is needed for the chart checks and NEATROOTS_REQUIRE_SERVICES=1 forbids skipping (run scripts/helm.sh)');
  skipLine('the chart\'s upgrade values', 'no helm (run scripts/helm.sh, or set NEATROOTS_HELM)');
}

(helm ? describe : describe.skip)('the chart\'s values for upgrading in steps', () => {
  const h = helm!;
  jest.setTimeout(60_000);

  describe('<service>.image.tag: one service\'s image, for an upgrade in order', () => {
    const COMPONENTS = ['ingest', 'rule-engine', 'question', 'review', 'api'];
    const images = (objs: Obj[]) => Object.fromEntries(
      objs.filter((o) => o.kind === 'Deployment').map((d) => [d.metadata.labels?.['app.kubernetes.io/component'], d.spec.template.spec.containers[0].image as string]),
    );
    const all = (image: string) => Object.fromEntries(COMPONENTS.map((c) => [c, image]));

    it('question.image.tag changes the question Deployment\'s image alone; the others keep image.tag', () => {
      expect(images(render(h, chart, ['--set', 'image.repository=registry.example.com/neatroots', '--set', 'image.tag=2026-12-06', '--set', 'question.image.tag=2026-12-07'])))
        .toEqual({ ...all('registry.example.com/neatroots:2026-12-06'), question: 'registry.example.com/neatroots:2026-12-07' });
    });

    it('ruleEngine.image.tag keeps the rule engine on the old build while the rest move on (the first of two releases)', () => {
      expect(images(render(h, chart, ['--set', 'image.tag=new', '--set', 'ruleEngine.image.tag=old'])))
        .toEqual({ ...all('neatroots:new'), 'rule-engine': 'neatroots:old' });
      // the second release: without it, every service on image.tag
      expect(images(render(h, chart, ['--set', 'image.tag=new']))).toEqual(all('neatroots:new'));
    });

    it('unset everywhere (values of an earlier chart without it, as --reuse-values keeps them): image.tag, else the appVersion', () => {
      const appVersion = (YAML.parse(readFileSync(path.join(chart, 'Chart.yaml'), 'utf8')) as { appVersion: string }).appVersion;
      const noOwnTags = ['ingest', 'ruleEngine', 'question', 'review', 'api'].flatMap((v) => ['--set', `${v}.image=null`]);
      expect(images(render(h, chart, noOwnTags))).toEqual(all(`neatroots:${appVersion}`));
      expect(images(render(h, chart, [...noOwnTags, '--set', 'image.tag=x']))).toEqual(all('neatroots:x'));
      const bad = spawnSync(h, ['template', 'nr', chart, '--set', 'question.image.repository=elsewhere/neatroots'], { encoding: 'utf8' });
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toMatch(/question\/image/);
    });
  });

  describe('internalTokenRequired: NEATROOTS_INTERNAL_TOKEN_REQUIRED of every service', () => {
    it('true by default (a new install), and what the value says when set', () => {
      expect(loadConfig(envOf(render(h, chart))).NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe(true);
      const off = envOf(render(h, chart, ['--set', 'internalTokenRequired=false']));
      expect(off.NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe('false');
      // the services still get the token, and send it
      expect(loadConfig(off)).toMatchObject({ NEATROOTS_INTERNAL_TOKEN_REQUIRED: false, NEATROOTS_INTERNAL_TOKEN: expect.stringMatching(/^[A-Za-z0-9]{40}$/) });
      expect(envOf(render(h, chart, ['--set', 'internalTokenRequired=true'])).NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe('true');
      // config.extraEnv may set it itself: the ConfigMap holds it once
      expect(envOf(render(h, chart, ['--set', 'config.extraEnv.NEATROOTS_INTERNAL_TOKEN_REQUIRED=false'])).NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe('false');
      const bad = spawnSync(h, ['template', 'nr', chart, '--set', 'internalTokenRequired=maybe'], { encoding: 'utf8' });
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toMatch(/internalTokenRequired/);
    });

    it('false on the upgrade of a release whose Secret holds no internal token (a chart before it made it), true on the next', () => {
      // The Secret a chart before the internal token made: the old pods, still running while the upgrade rolls out, send no token.
      withReleaseSecret({ data: { NEATROOTS_REDIS_URL: b64('redis://redis:6379'), NEATROOTS_SECRET_KEY: b64('a3'.repeat(32)) } }, (copy) => {
        const env = envOf(render(h, copy));
        expect(loadConfig(env)).toMatchObject({ NEATROOTS_INTERNAL_TOKEN_REQUIRED: false, NEATROOTS_INTERNAL_TOKEN: expect.stringMatching(/^[A-Za-z0-9]{40}$/) });
        // said outright, it is what it says
        expect(envOf(render(h, copy, ['--set', 'internalTokenRequired=true'])).NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe('true');
      });
      // The next upgrade: the Secret holds the token now (kept), and calls without it are refused.
      withReleaseSecret({ data: { NEATROOTS_REDIS_URL: b64('redis://redis:6379'), NEATROOTS_INTERNAL_TOKEN: b64('kept-internal-token-0123456789') } }, (copy) => {
        const env = envOf(render(h, copy));
        expect(loadConfig(env)).toMatchObject({ NEATROOTS_INTERNAL_TOKEN_REQUIRED: true, NEATROOTS_INTERNAL_TOKEN: 'kept-internal-token-0123456789' });
        expect(envOf(render(h, copy, ['--set', 'internalTokenRequired=false'])).NEATROOTS_INTERNAL_TOKEN_REQUIRED).toBe('false');
      });
    });
  });
});

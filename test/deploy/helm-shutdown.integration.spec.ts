/**
 * The chart's stop: each pod keeps serving, not ready, for config.shutdownDelayMs after SIGTERM
 * (NEATROOTS_SHUTDOWN_DELAY_MS), while its Service's endpoints and an ingress stop sending it new
 * connections, and its terminationGracePeriodSeconds leaves its stop the time it had before.
 * helm as in helm.integration.spec.ts (skipped without one, unless NEATROOTS_REQUIRE_SERVICES=1).
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import * as YAML from 'yaml';
import { loadConfig } from '../../libs/platform/src/config';
import { findHelm, repoRoot, skipLine, toolsRequired } from './support';

interface K8sObject {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec?: { template?: { spec?: { terminationGracePeriodSeconds?: number } } };
}

/** What each service's stop had before the delay: the chart's 30 s (the rule engine's 60). */
const STOP_SECONDS = 30;

function render(helm: string, extra: string[] = []): K8sObject[] {
  const r = spawnSync(helm, ['template', 'nr', path.join(repoRoot, 'helm/neatroots'), '--namespace', 'neatroots', ...extra], { encoding: 'utf8', cwd: repoRoot });
  if (r.status !== 0) throw new Error(`helm template failed:\n${r.stderr}`);
  return YAML.parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as K8sObject | null)
    .filter((o): o is K8sObject => !!o);
}

/** The delay every service reads, and each Deployment's grace period, by component. */
function stopOf(objects: K8sObject[]): { delayMs: number; grace: Record<string, number | undefined> } {
  const cm = objects.find((o) => o.kind === 'ConfigMap' && o.data?.NEATROOTS_KAFKA_BROKERS)!;
  const grace = Object.fromEntries(
    objects.filter((o) => o.kind === 'Deployment').map((d) => [d.metadata.labels?.['app.kubernetes.io/component'], d.spec?.template?.spec?.terminationGracePeriodSeconds]),
  );
  return { delayMs: loadConfig(cm.data!).NEATROOTS_SHUTDOWN_DELAY_MS, grace };
}

const helm = findHelm();
if (!helm) {
  const how = 'no helm binary: run scripts/helm.sh or set NEATROOTS_HELM';
  if (toolsRequired()) {
    it('needs helm', () => {
      throw new Error(`NEATROOTS_REQUIRE_SERVICES=1 forbids skipping the helm chart checks: ${how}`);
    });
  } else {
    skipLine('helm chart stop checks (test/deploy/helm-shutdown.integration.spec.ts)', how);
    it.skip(`helm chart stop checks (${how})`, () => undefined);
  }
} else {
  const h: string = helm;
  describe('the chart: a pod stops not ready first, with room for its stop', () => {
    it('serves 5 s not ready after SIGTERM, and every service still has its 30 s (the rule engine 60) for the stop after it', () => {
      const { delayMs, grace } = stopOf(render(h));
      expect(delayMs).toBe(5000);
      expect(Object.keys(grace).sort()).toEqual(['api', 'ingest', 'question', 'review', 'rule-engine']);
      for (const [c, s] of Object.entries(grace)) expect({ [c]: (s ?? 30) - delayMs / 1000 >= STOP_SECONDS }).toEqual({ [c]: true });
      expect(grace['rule-engine']).toBe(60);
    });

    it('config.shutdownDelayMs sets NEATROOTS_SHUTDOWN_DELAY_MS of every service (0: the ports close at once)', () => {
      expect(stopOf(render(h, ['--set', 'config.shutdownDelayMs=0'])).delayMs).toBe(0);
      expect(stopOf(render(h, ['--set', 'config.shutdownDelayMs=8000'])).delayMs).toBe(8000);
    });
  });
}

/**
 * The helm chart (helm/neatroots), checked with a real helm: `helm lint --strict` and
 * `helm template` with the default values and with each override in helm/neatroots/ci/, then
 * every rendered object validated against the Kubernetes API schemas that the
 * `kubernetes-models` package carries (types, formats, required fields, and here also unknown
 * fields, which the schemas alone let through), and the wiring between the objects asserted.
 *
 * helm comes from `scripts/helm.sh` (built with Go from the Go module proxy), $NEATROOTS_HELM,
 * or PATH. Without one the suite is skipped with one line saying so; with
 * NEATROOTS_REQUIRE_SERVICES=1 (CI) it fails instead.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import * as YAML from 'yaml';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler, type IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Ingress, type IIngress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget, type IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap, type IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret, type ISecret } from 'kubernetes-models/v1/Secret';
import { Service, type IService } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { loadModelConfig } from '@neatroots/platform';
import { loadConfig } from '../../libs/platform/src/config';
import { findHelm, repoRoot, skipLine, toolsRequired } from './support';

const chart = path.join(repoRoot, 'helm/neatroots');
const COMPONENTS = ['ingest', 'rule-engine', 'question', 'review', 'api'] as const;
type Component = (typeof COMPONENTS)[number];
const RELEASE = 'nr';
const NAMESPACE = 'neatroots';

interface Validatable { validate(): void }
type ModelClass = new (data: never) => Validatable;

/** Every kind the chart may render, with the model whose schema checks it. */
const MODELS: Record<string, ModelClass> = {
  'apps/v1/Deployment': Deployment,
  'v1/Service': Service,
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/ServiceAccount': ServiceAccount,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  // the `helm test` Pods (templates/tests/health.yaml)
  'v1/Pod': Pod,
};

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}

/**
 * The paths of fields the schema does not know. The compiled validators look up every property
 * their schema defines (and every entry of a map), so a field never looked up while validating
 * is one the API server would drop or refuse: a typo such as `readinesProbe` passes the schema
 * check alone.
 */
function unknownFields(model: Validatable): string[] {
  const seen = new Set<string>();
  const track = (v: unknown, at: string): unknown => {
    if (v === null || typeof v !== 'object') return v;
    return new Proxy(v as object, {
      get(target, key, receiver) {
        const value: unknown = Reflect.get(target, key, receiver);
        if (typeof key !== 'string') return value;
        seen.add(`${at}/${key}`);
        return track(value, `${at}/${key}`);
      },
    });
  };
  (track(model, '') as Validatable).validate();
  const unknown: string[] = [];
  const walk = (v: unknown, at: string): void => {
    if (v === null || typeof v !== 'object') return;
    for (const [k, child] of Object.entries(v as Record<string, unknown>)) {
      if (!seen.has(`${at}/${k}`)) unknown.push(`${at}/${k}`);
      else walk(child, `${at}/${k}`);
    }
  };
  walk(JSON.parse(JSON.stringify(model)), '');
  return unknown;
}

function helmRun(helm: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(helm, args, { encoding: 'utf8', cwd: repoRoot, env: { ...process.env, HELM_NAMESPACE: NAMESPACE } });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

function render(helm: string, valueFiles: string[], extra: string[] = []): K8sObject[] {
  const r = helmRun(helm, ['template', RELEASE, chart, '--namespace', NAMESPACE, ...valueFiles.flatMap((f) => ['-f', f]), ...extra]);
  if (r.status !== 0) throw new Error(`helm template failed:\n${r.stderr}`);
  const docs = YAML.parseAllDocuments(r.stdout);
  const out: K8sObject[] = [];
  for (const d of docs) {
    if (d.errors.length) throw new Error(`rendered YAML does not parse: ${d.errors.map((e) => e.message).join('; ')}`);
    const obj = d.toJSON() as K8sObject | null;
    if (obj) out.push(obj);
  }
  return out;
}

/** The rendered objects of one render, by kind, with typed finders. */
class Rendered {
  constructor(readonly objects: K8sObject[]) {}
  of<T>(kind: string): T[] {
    return this.objects.filter((o) => o.kind === kind) as unknown as T[];
  }
  named<T>(kind: string, name: string): T | undefined {
    return this.objects.find((o) => o.kind === kind && o.metadata.name === name) as unknown as T | undefined;
  }
  deployment(c: Component): IDeployment {
    const d = this.of<IDeployment>('Deployment').find((x) => x.metadata?.labels?.['app.kubernetes.io/component'] === c);
    if (!d) throw new Error(`no Deployment for ${c}`);
    return d;
  }
  /** The service's own Service, named as its Deployment. */
  service(c: Component): IService {
    const name = this.deployment(c).metadata?.name;
    const s = this.of<IService>('Service').find((x) => x.metadata?.labels?.['app.kubernetes.io/component'] === c && x.metadata?.name === name);
    if (!s) throw new Error(`no Service for ${c}`);
    return s;
  }
}

function podLabels(d: IDeployment): Record<string, string> {
  return d.spec?.template.metadata?.labels ?? {};
}

function selects(selector: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  return Boolean(selector && Object.keys(selector).length) && Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);
}

function decode(secret: ISecret): Record<string, string> {
  return Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
}

interface Scenario {
  name: string;
  files: string[];
}

const SCENARIOS: Scenario[] = [
  { name: 'default values', files: [] },
  { name: 'ci/scaled-values.yaml (replicas, autoscaling, keys, no ingress)', files: [path.join(chart, 'ci/scaled-values.yaml')] },
  { name: 'ci/ingress-values.yaml (ingress, existing Secret, LoadBalancer)', files: [path.join(chart, 'ci/ingress-values.yaml')] },
  { name: 'ci/optional-values.yaml (NetworkPolicies, the OTLP/HTTP Ingress, helm test Pods)', files: [path.join(chart, 'ci/optional-values.yaml')] },
];

const helm = findHelm();

if (!helm) {
  const how = 'no helm binary: run scripts/helm.sh (builds helm with Go, a few minutes once) or set NEATROOTS_HELM';
  if (toolsRequired()) {
    it('needs helm', () => {
      throw new Error(`NEATROOTS_REQUIRE_SERVICES=1 forbids skipping the helm chart checks: ${how}`);
    });
  } else {
    skipLine('helm chart checks (test/deploy/helm.integration.spec.ts)', how);
    it.skip(`helm chart checks (${how})`, () => undefined);
  }
} else {
  const h: string = helm;
  jest.setTimeout(60_000);

  describe(`helm chart helm/neatroots (${h})`, () => {
    it('has an override file in the checks for every file in ci/', () => {
      const files = readdirSync(path.join(chart, 'ci')).filter((f) => f.endsWith('.yaml')).map((f) => path.join(chart, 'ci', f));
      expect(SCENARIOS.flatMap((s) => s.files).sort()).toEqual(files.sort());
    });

    describe.each(SCENARIOS)('$name', ({ files }) => {
      let r: Rendered;
      beforeAll(() => {
        r = new Rendered(render(h, files));
      });

      it('passes helm lint --strict', () => {
        const lint = helmRun(h, ['lint', '--strict', chart, ...files.flatMap((f) => ['-f', f])]);
        expect({ status: lint.status, out: lint.stdout + lint.stderr }).toEqual({ status: 0, out: expect.stringContaining('0 chart(s) failed') });
        expect(lint.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
      });

      it('renders only objects that validate against the Kubernetes schemas, with no unknown field', () => {
        expect(r.objects.length).toBeGreaterThanOrEqual(13);
        const problems: string[] = [];
        for (const o of r.objects) {
          const id = `${o.kind}/${o.metadata?.name}`;
          const Model = MODELS[`${o.apiVersion}/${o.kind}`];
          if (!Model) {
            problems.push(`${id}: ${o.apiVersion} ${o.kind} has no model here; add it to MODELS`);
            continue;
          }
          const model = new Model(o as never);
          try {
            model.validate();
          } catch (err) {
            problems.push(`${id}: ${(err as Error).message}`);
            continue;
          }
          for (const f of unknownFields(model)) problems.push(`${id}: unknown field ${f}`);
          // DNS-1123 names; Services even stricter (DNS-1035 label: starts with a letter)
          const re = o.kind === 'Service' ? /^[a-z]([-a-z0-9]*[a-z0-9])?$/ : /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
          if (!re.test(o.metadata.name) || o.metadata.name.length > 63) problems.push(`${id}: invalid name`);
          for (const [k, v] of Object.entries(o.metadata.labels ?? {})) {
            if (v.length > 63 || !/^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/.test(v)) problems.push(`${id}: label ${k}=${v} is not a valid label value`);
          }
        }
        const ids = r.objects.map((o) => `${o.kind}/${o.metadata.name}`);
        for (const dup of ids.filter((x, i) => ids.indexOf(x) !== i)) problems.push(`${dup}: rendered twice`);
        expect(problems).toEqual([]);
      });

      it.each(COMPONENTS)('runs %s as its own Deployment with `serve --target`, probes on the admin port and resources', (c) => {
        const d = r.deployment(c);
        const spec = d.spec!;
        expect(spec.selector.matchLabels?.['app.kubernetes.io/component']).toBe(c);
        expect(selects(spec.selector.matchLabels, podLabels(d))).toBe(true);
        const pod = spec.template.spec!;
        expect(pod.containers).toHaveLength(1);
        const ct = pod.containers[0];
        expect(ct.args).toEqual(['serve', '--target', c]);
        expect(ct.command).toBeUndefined(); // the image's ENTRYPOINT runs the CLI
        const ports = new Map((ct.ports ?? []).map((p) => [p.name, p.containerPort]));
        expect(ports.get('admin')).toBe(9464);
        expect(ct.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'admin' });
        expect(ct.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'admin' });
        expect(ct.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'admin' });
        for (const res of ['cpu', 'memory']) {
          expect(ct.resources?.requests?.[res]).toBeDefined();
          expect(ct.resources?.limits?.[res]).toBeDefined();
        }
        // envFrom: the chart's ConfigMap, and the Secret (the chart's or an existing one)
        const cmRef = ct.envFrom?.find((e) => e.configMapRef)?.configMapRef?.name;
        expect(r.named<IConfigMap>('ConfigMap', cmRef ?? '')).toBeDefined();
        expect(ct.envFrom?.find((e) => e.secretRef)?.secretRef?.name).toBeTruthy();
        // the database's URL and password reach the review service alone (the only one using Postgres)
        // (its own Secret, or the existing one named for it, as its second secretRef)
        const secretRefs = (ct.envFrom ?? []).flatMap((e) => (e.secretRef?.name ? [e.secretRef.name] : []));
        expect(secretRefs).toHaveLength(c === 'review' ? 2 : 1);
        const secretKeys = secretRefs.flatMap((name) => {
          const s = r.named<ISecret>('Secret', name);
          return s ? Object.keys(decode(s)) : [];
        });
        if (r.of('Secret').length) expect(secretKeys.includes('NEATROOTS_PG_URL')).toBe(c === 'review');
        // every mount has a volume; configMap volumes name rendered ConfigMaps
        const volumes = new Map((pod.volumes ?? []).map((v) => [v.name, v]));
        for (const m of ct.volumeMounts ?? []) expect(volumes.has(m.name)).toBe(true);
        for (const v of volumes.values()) if (v.configMap) expect(r.named('ConfigMap', v.configMap.name ?? '')).toBeDefined();
        // non-root, read-only root file system, /data writable
        expect(pod.securityContext?.runAsNonRoot).toBe(true);
        expect(ct.securityContext?.readOnlyRootFilesystem).toBe(true);
        expect(ct.volumeMounts?.map((m) => m.mountPath)).toEqual(expect.arrayContaining(['/data', '/tmp']));
        expect(d.spec?.template.metadata?.annotations?.['checksum/config']).toMatch(/^[0-9a-f]{64}$/);
      });

      it.each(COMPONENTS)('puts a Service in front of %s that selects its pods and targets its named ports', (c) => {
        const d = r.deployment(c);
        const s = r.service(c);
        expect(selects(s.spec?.selector, podLabels(d))).toBe(true);
        const names = new Set(d.spec!.template.spec!.containers[0].ports?.map((p) => p.name));
        for (const p of s.spec?.ports ?? []) expect(names.has(String(p.targetPort))).toBe(true);
        const expected: Record<Component, number[]> = {
          ingest: [4317, 4318, 50051], 'rule-engine': [50054], question: [50052], review: [50053], api: [8080],
        };
        // the admin port too, when the Service stays inside the cluster
        const inside = (s.spec?.type ?? 'ClusterIP') === 'ClusterIP';
        expect(s.spec?.ports?.map((p) => p.port)).toEqual(inside ? [...expected[c], 9464] : expected[c]);
      });

      it.each(COMPONENTS)('keeps %s\'s admin port (/metrics, probes) inside the cluster, on a ClusterIP Service the helm test Pod asks', (c) => {
        const d = r.deployment(c);
        const services = r.of<IService>('Service').filter((s) => selects(s.spec?.selector, podLabels(d)));
        // no Service reachable from outside the cluster carries it
        for (const s of services.filter((x) => (x.spec?.type ?? 'ClusterIP') !== 'ClusterIP')) {
          expect({ service: s.metadata?.name, ports: s.spec?.ports?.map((p) => p.name) }).not.toEqual(expect.objectContaining({ ports: expect.arrayContaining(['admin']) }));
        }
        const admin = services.filter((s) => (s.spec?.type ?? 'ClusterIP') === 'ClusterIP' && s.spec?.ports?.some((p) => p.name === 'admin' && p.port === 9464 && p.targetPort === 'admin'));
        expect(admin).toHaveLength(1);
        const test = r.of<{ metadata: { name: string }; spec: { containers: { env?: { name: string; value: string }[] }[] } }>('Pod')
          .find((p) => p.metadata.name === `${r.service(c).metadata?.name}-test`);
        if (test) expect(test.spec.containers[0].env).toEqual([{ name: 'URL', value: `http://${admin[0].metadata?.name}:9464/readyz` }]);
      });

      it('gives every service a configuration that passes the start-up validation and addresses that resolve', () => {
        const cm = r.of<IConfigMap>('ConfigMap').find((x) => x.data?.NEATROOTS_KAFKA_BROKERS)!;
        const secretName = r.deployment('ingest').spec!.template.spec!.containers[0].envFrom!.find((e) => e.secretRef)!.secretRef!.name!;
        const secret = r.named<ISecret>('Secret', secretName);
        const env = { ...cm.data, ...(secret ? decode(secret) : {}) };
        const config = loadConfig(env);
        // the question service's model settings too: a model endpoint without its model stops every service
        expect(() => loadModelConfig(env)).not.toThrow();
        expect(config.NEATROOTS_HOST).toBe('0.0.0.0');
        expect(config.NEATROOTS_KAFKA_BROKERS.length).toBeGreaterThan(0);
        // distributed, a pre-call check waits for the run's spans to come through Kafka: 50 ms (the embedded default) is too short
        expect(config.NEATROOTS_PRECHECK_TIMEOUT_MS).toBe(500);
        for (const [addr, target] of [['NEATROOTS_QUESTION_ADDR', 'question'], ['NEATROOTS_REVIEW_ADDR', 'review'], ['NEATROOTS_RULE_ENGINE_ADDR', 'rule-engine']] as const) {
          const [host, port] = String(env[addr]).split(':');
          const s = r.service(target);
          expect(host).toBe(s.metadata?.name);
          expect(s.spec?.ports?.map((p) => String(p.port))).toContain(port);
        }
        for (const [k, v] of Object.entries(env)) expect({ [k]: v }).not.toEqual({ [k]: '' });
      });

      it('protects the rule engine with a PodDisruptionBudget that selects exactly its pods and lets one go', () => {
        const pdbs = r.of<IPodDisruptionBudget>('PodDisruptionBudget');
        const re = r.deployment('rule-engine');
        const mine = pdbs.filter((p) => selects(p.spec?.selector?.matchLabels, podLabels(re)));
        expect(mine).toHaveLength(1);
        const spec = mine[0].spec!;
        expect(spec.minAvailable === undefined || spec.maxUnavailable === undefined).toBe(true);
        if (spec.minAvailable !== undefined) expect(Number(spec.minAvailable)).toBeLessThan(re.spec!.replicas ?? 1);
        else expect(Number(spec.maxUnavailable)).toBeGreaterThanOrEqual(1);
        for (const c of COMPONENTS.filter((x) => x !== 'rule-engine')) {
          expect(mine[0].spec?.selector?.matchLabels && selects(mine[0].spec.selector.matchLabels, podLabels(r.deployment(c)))).toBe(false);
        }
        for (const p of pdbs) {
          expect(r.of<IDeployment>('Deployment').filter((d) => selects(p.spec?.selector?.matchLabels, podLabels(d)))).toHaveLength(1);
        }
      });

      it('scales each autoscaled Deployment by its HPA alone', () => {
        for (const hpa of r.of<IHorizontalPodAutoscaler>('HorizontalPodAutoscaler')) {
          const target = r.named<IDeployment>('Deployment', hpa.spec!.scaleTargetRef.name);
          expect(target).toBeDefined();
          expect(target!.spec?.replicas).toBeUndefined(); // or every upgrade would reset the HPA's count
          expect(hpa.spec!.minReplicas ?? 1).toBeLessThanOrEqual(hpa.spec!.maxReplicas);
        }
      });

      it('routes every Ingress path to a rendered Service port', () => {
        for (const ing of r.of<IIngress>('Ingress')) {
          for (const rule of ing.spec?.rules ?? []) {
            for (const p of rule.http?.paths ?? []) {
              const s = r.named<IService>('Service', p.backend.service!.name);
              expect(s).toBeDefined();
              expect(s!.spec?.ports?.map((x) => x.name)).toContain(p.backend.service!.port!.name);
            }
          }
        }
      });
    });

    describe('what each values file changes', () => {
      it('default values: replicas from values, rule-engine PDB maxUnavailable 1, no HPA, no Ingress', () => {
        const r = new Rendered(render(h, []));
        expect(Object.fromEntries(COMPONENTS.map((c) => [c, r.deployment(c).spec?.replicas])))
          .toEqual({ ingest: 2, 'rule-engine': 2, question: 1, review: 1, api: 2 });
        expect(r.of<IPodDisruptionBudget>('PodDisruptionBudget').map((p) => p.spec?.maxUnavailable)).toEqual([1]);
        expect(r.of('HorizontalPodAutoscaler')).toEqual([]);
        expect(r.of('Ingress')).toEqual([]);
        expect(r.deployment('rule-engine').spec!.template.spec!.terminationGracePeriodSeconds).toBe(60);
        expect(r.deployment('ingest').spec!.template.spec!.containers[0].image).toBe('neatroots:0.1.0');
        expect(r.of<ISecret>('Secret').map((x) => Object.keys(decode(x)).sort())).toEqual([['NEATROOTS_INTERNAL_TOKEN', 'NEATROOTS_REDIS_URL', 'NEATROOTS_SECRET_KEY'], ['NEATROOTS_PG_URL']]);
        // A random internal token every service reads (the services' own ports ask for it).
        expect(loadConfig(decode(r.of<ISecret>('Secret')[0])).NEATROOTS_INTERNAL_TOKEN).toMatch(/^[A-Za-z0-9]{40}$/);
        expect(decode(new Rendered(render(h, [], ['--set', 'internalToken=our-own-internal-token'])).of<ISecret>('Secret')[0]).NEATROOTS_INTERNAL_TOKEN).toBe('our-own-internal-token');
        // A random key secrets are encrypted with (GitHub connections are off without one), in the
        // Secret every service reads: 32 bytes the start-up validation takes.
        const key = loadConfig(decode(r.of<ISecret>('Secret')[0])).NEATROOTS_SECRET_KEY;
        expect(key?.length).toBe(32);
        expect(key?.equals(Buffer.alloc(32))).toBe(false);
      });

      it('ingestKeys: agents\' keys that may only send spans, beside the full apiKeys (one with a colon still full)', () => {
        const r = new Rendered(render(h, [], ['--set', 'apiKeys.shop=ops:key-1', '--set', 'ingestKeys.shop=agent-key-1', '--set', 'ingestKeys.web=browser-key-1']));
        expect(loadConfig(decode(r.of<ISecret>('Secret')[0])).NEATROOTS_API_KEYS).toEqual([
          { project: 'shop', key: 'ops:key-1', scope: 'api' },
          { project: 'shop', key: 'agent-key-1', scope: 'ingest' },
          { project: 'web', key: 'browser-key-1', scope: 'ingest' },
        ]);
      });

      it('ci/scaled-values.yaml: more replicas, HPA on ingest, keys and checks in place, no Ingress', () => {
        const r = new Rendered(render(h, [path.join(chart, 'ci/scaled-values.yaml')]));
        expect(r.deployment('rule-engine').spec?.replicas).toBe(4);
        expect(r.deployment('api').spec?.replicas).toBe(3);
        expect(r.deployment('ingest').spec?.replicas).toBeUndefined();
        const hpa = r.of<IHorizontalPodAutoscaler>('HorizontalPodAutoscaler');
        expect(hpa.map((x) => [x.spec?.scaleTargetRef.name, x.spec?.minReplicas, x.spec?.maxReplicas]))
          .toEqual([[r.deployment('ingest').metadata?.name, 3, 12]]);
        expect(hpa[0].spec?.metrics?.map((m) => m.resource?.name)).toEqual(['cpu', 'memory']);
        const rePdb = r.of<IPodDisruptionBudget>('PodDisruptionBudget').find((p) => selects(p.spec?.selector?.matchLabels, podLabels(r.deployment('rule-engine'))));
        expect(rePdb?.spec).toMatchObject({ minAvailable: 2 });
        expect(rePdb?.spec?.maxUnavailable).toBeUndefined();
        expect(r.of('Ingress')).toEqual([]);
        const secret = decode(r.of<ISecret>('Secret')[0]);
        expect(loadConfig(secret).NEATROOTS_API_KEYS).toEqual([
          { project: 'checkout-agents', key: 'nr_0123456789abcdef' },
          { project: 'support-bot', key: 'nr_fedcba9876543210' },
        ]);
        expect(secret).toMatchObject({ NEATROOTS_LLM_KEY: 'sk-local', NEATROOTS_DECISION_MODEL_KEY: 'dk-0000', NEATROOTS_REASONING_MODEL_KEY: 'rk-0000' });
        const cm = r.of<IConfigMap>('ConfigMap').find((x) => x.data?.NEATROOTS_KAFKA_BROKERS)!;
        expect(cm.data).toMatchObject({
          NEATROOTS_KAFKA_BROKERS: 'kafka-0.kafka-headless.data:9092,kafka-1.kafka-headless.data:9092,kafka-2.kafka-headless.data:9092',
          NEATROOTS_TOPIC_PREFIX: 'prod.neatroots', NEATROOTS_STEERING: 'checkout-agents', NEATROOTS_EXAMPLE_FLAG: '1',
          NEATROOTS_LLM_URL: 'http://vllm.models:8000/v1', NEATROOTS_LLM_MODEL: 'qwen2.5-7b-instruct',
          NEATROOTS_DECISION_MODEL_URL: 'http://decisions.models:8080', NEATROOTS_DECISION_MODEL_NAME: 'jev-decisions-1',
          NEATROOTS_REASONING_MODEL_URL: 'http://reasoning.models:8000/v1', NEATROOTS_REASONING_MODEL_NAME: 'deepseek-r1',
        });
        // secrets never land in the ConfigMap
        expect(JSON.stringify(cm)).not.toMatch(/s3cret|sk-local|nr_0123|dk-0000|rk-0000/);
        // every model the values name is one the question service asks, with its key
        expect(loadModelConfig({ ...cm.data, ...secret })).toMatchObject({
          local: { url: 'http://vllm.models:8000/v1', model: 'qwen2.5-7b-instruct', key: 'sk-local' },
          decision: { url: 'http://decisions.models:8080', model: 'jev-decisions-1', key: 'dk-0000' },
          reasoning: { url: 'http://reasoning.models:8000/v1', model: 'deepseek-r1', key: 'rk-0000' },
        });
        const checks = r.of<IConfigMap>('ConfigMap').find((x) => x.data?.['team.yaml']);
        expect(checks).toBeDefined();
        for (const c of COMPONENTS) {
          const mount = r.deployment(c).spec!.template.spec!.containers[0].volumeMounts?.find((m) => m.mountPath === '/data/checks');
          expect(mount?.readOnly).toBe(true);
        }
      });

      it('ci/ingress-values.yaml: an Ingress for the API, the existing Secret, no chart-made Secret or ServiceAccount', () => {
        const r = new Rendered(render(h, [path.join(chart, 'ci/ingress-values.yaml')]));
        const ing = r.of<IIngress>('Ingress');
        expect(ing).toHaveLength(1);
        expect(ing[0].spec?.rules?.[0].host).toBe('neatroots.example.com');
        expect(ing[0].spec?.rules?.[0].http?.paths[0].backend.service?.name).toBe(r.service('api').metadata?.name);
        expect(r.of('Secret')).toEqual([]);
        expect(r.of('ServiceAccount')).toEqual([]);
        for (const c of COMPONENTS) {
          const pod = r.deployment(c).spec!.template.spec!;
          expect(pod.serviceAccountName).toBe('neatroots-runner');
          expect(pod.containers[0].envFrom?.filter((e) => e.secretRef).map((e) => e.secretRef?.name))
            .toEqual(c === 'review' ? ['neatroots-secrets', 'neatroots-postgres'] : ['neatroots-secrets']);
          expect(pod.containers[0].image).toBe('registry.example.com/neatroots:0.1.0-rc1');
          expect(pod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
          expect(r.deployment(c).metadata?.name).toBe(`nr-${c}`);
        }
        expect(r.service('ingest').spec?.type).toBe('LoadBalancer');
      });
    });

    describe('settings docs/deployment.md documents', () => {
      /** What every service's environment holds: the ConfigMap and the chart's Secret. */
      const envOf = (r: Rendered): Record<string, string> => {
        const cm = r.of<IConfigMap>('ConfigMap').find((x) => x.data?.NEATROOTS_KAFKA_BROKERS)!;
        const secretName = r.deployment('question').spec!.template.spec!.containers[0].envFrom!.find((e) => e.secretRef)!.secretRef!.name!;
        return { ...cm.data, ...decode(r.named<ISecret>('Secret', secretName)!) };
      };

      it('--set-file postgres.url=./pg-url.txt (and redis.url): a file ending in a newline is taken, without the newline', () => {
        const dir = mkdtempSync(path.join(tmpdir(), 'neatroots-set-file-'));
        try {
          writeFileSync(path.join(dir, 'pg-url.txt'), 'postgres://neatroots:s3cret@pg-rw.data:5432/neatroots\n');
          writeFileSync(path.join(dir, 'redis-url.txt'), 'redis://:s3cret@redis-master.data:6379/0\r\n');
          const r = new Rendered(render(h, [], ['--set-file', `postgres.url=${path.join(dir, 'pg-url.txt')}`, '--set-file', `redis.url=${path.join(dir, 'redis-url.txt')}`]));
          const pgSecret = r.deployment('review').spec!.template.spec!.containers[0].envFrom!.filter((e) => e.secretRef)[1].secretRef!.name!;
          expect(decode(r.named<ISecret>('Secret', pgSecret)!).NEATROOTS_PG_URL).toBe('postgres://neatroots:s3cret@pg-rw.data:5432/neatroots');
          const env = envOf(r);
          expect(env.NEATROOTS_REDIS_URL).toBe('redis://:s3cret@redis-master.data:6379/0');
          expect(loadConfig(env).NEATROOTS_REDIS_URL).toBe('redis://:s3cret@redis-master.data:6379/0');
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      });

      it('kafka.partitions: NEATROOTS_PARTITIONS of every service (the topics they create)', () => {
        expect(loadConfig(envOf(new Rendered(render(h, [])))).NEATROOTS_PARTITIONS).toBe(6);
        expect(loadConfig(envOf(new Rendered(render(h, [], ['--set', 'kafka.partitions=12'])))).NEATROOTS_PARTITIONS).toBe(12);
      });

      it('heapPercent: each service\'s node heap (NODE_OPTIONS --max-old-space-size) at that share of its own memory limit; 0 or its own NODE_OPTIONS leaves node its own', () => {
        const nodeOptions = (r: Rendered, c: Component) => r.deployment(c).spec!.template.spec!.containers[0].env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
        const defaults = new Rendered(render(h, []));
        // 45% of 512Mi and of 1Gi: V8 collects before the pod's limit, the rest holds the young
        // generation, code, fetched bytes and the command's own process (docs/operations.md)
        for (const c of ['ingest', 'question', 'review', 'api'] as const) expect(nodeOptions(defaults, c)).toBe('--max-old-space-size=230');
        expect(nodeOptions(defaults, 'rule-engine')).toBe('--max-old-space-size=460');
        // from the limit each service is given, in any unit
        const set = new Rendered(render(h, [], ['--set', 'heapPercent=60', '--set', 'question.resources.limits.memory=1536Mi', '--set', 'review.resources.limits.memory=2G', '--set', 'api.env.NODE_OPTIONS=--max-old-space-size=100']));
        expect(nodeOptions(set, 'question')).toBe('--max-old-space-size=921');
        expect(nodeOptions(set, 'review')).toBe(`--max-old-space-size=${Math.floor((2e9 / 1048576) * 0.6)}`);
        expect(nodeOptions(set, 'api')).toBe('--max-old-space-size=100');
        expect(set.deployment('api').spec!.template.spec!.containers[0].env!.filter((e) => e.name === 'NODE_OPTIONS')).toHaveLength(1);
        const off = new Rendered(render(h, [], ['--set', 'heapPercent=0']));
        for (const c of COMPONENTS) expect(nodeOptions(off, c)).toBeUndefined();
        expect(() => render(h, [], ['--set', 'question.resources.limits.memory=lots'])).toThrow(/a memory limit of "lots"/);
      });

      it('config.precheckTimeoutMs: NEATROOTS_PRECHECK_TIMEOUT_MS of every service', () => {
        expect(loadConfig(envOf(new Rendered(render(h, [], ['--set', 'config.precheckTimeoutMs=750'])))).NEATROOTS_PRECHECK_TIMEOUT_MS).toBe(750);
      });

      it('config.retention: the review service\'s retention job (spans, transcripts, when), its variables in extraEnv winning', () => {
        const defaults = loadConfig(envOf(new Rendered(render(h, []))));
        expect([defaults.NEATROOTS_SPAN_RETENTION_DAYS, defaults.NEATROOTS_TRANSCRIPT_RETENTION_DAYS, defaults.NEATROOTS_RETENTION_CRON]).toEqual([30, 0, '23 * * * *']);
        const set = loadConfig(envOf(new Rendered(render(h, [], ['--set', 'config.retention.spanDays=7', '--set', 'config.retention.transcriptDays=90', '--set', 'config.retention.cron=5 3 * * *']))));
        expect([set.NEATROOTS_SPAN_RETENTION_DAYS, set.NEATROOTS_TRANSCRIPT_RETENTION_DAYS, set.NEATROOTS_RETENTION_CRON]).toEqual([7, 90, '5 3 * * *']);
        expect(loadConfig(envOf(new Rendered(render(h, [], ['--set', 'config.retention.spanDays=0'])))).NEATROOTS_SPAN_RETENTION_DAYS).toBe(0);
        // a release that set them in extraEnv before the chart had them keeps its own, once each
        const extra = new Rendered(render(h, [], ['--set', 'config.extraEnv.NEATROOTS_SPAN_RETENTION_DAYS=14', '--set', 'config.retention.spanDays=7']));
        expect(loadConfig(envOf(extra)).NEATROOTS_SPAN_RETENTION_DAYS).toBe(14);
      });

      it('secretKey: NEATROOTS_SECRET_KEY in the chart\'s Secret, read by every service, never in the ConfigMap', () => {
        const hex = 'a3'.repeat(32);
        const r = new Rendered(render(h, [], ['--set', `secretKey=${hex}`]));
        const env = envOf(r);
        expect(env.NEATROOTS_SECRET_KEY).toBe(hex);
        expect(loadConfig(env).NEATROOTS_SECRET_KEY?.toString('hex')).toBe(hex);
        for (const c of COMPONENTS) {
          const refs = r.deployment(c).spec!.template.spec!.containers[0].envFrom!.flatMap((e) => (e.secretRef?.name ? [e.secretRef.name] : []));
          expect(refs.some((name) => decode(r.named<ISecret>('Secret', name)!).NEATROOTS_SECRET_KEY === hex)).toBe(true);
        }
        expect(JSON.stringify(r.of<IConfigMap>('ConfigMap'))).not.toContain(hex);
      });

      it('models.decision.* and models.reasoning.*: the question service asks both, with their keys from the Secret', () => {
        const r = new Rendered(render(h, [], [
          '--set', 'models.decision.url=https://decisions.example.com/v1', '--set', 'models.decision.model=jev-1', '--set', 'models.decision.apiKey=dk-secret',
          '--set', 'models.reasoning.url=http://vllm.models:8000/v1', '--set', 'models.reasoning.model=qwq-32b', '--set', 'models.reasoning.apiKey=rk-secret',
        ]));
        const env = envOf(r);
        expect(() => loadConfig(env)).not.toThrow();
        const models = loadModelConfig(env);
        expect(models.decision).toMatchObject({ url: 'https://decisions.example.com/v1', model: 'jev-1', key: 'dk-secret' });
        expect(models.reasoning).toMatchObject({ url: 'http://vllm.models:8000/v1', model: 'qwq-32b', key: 'rk-secret' });
        const cm = r.of<IConfigMap>('ConfigMap').find((x) => x.data?.NEATROOTS_KAFKA_BROKERS)!;
        expect(JSON.stringify(cm)).not.toMatch(/dk-secret|rk-secret/);
      });
    });

    describe('refuses values that cannot work, naming the value', () => {
      it.each([
        [['--set', 'kafka.brokers=null'], /kafka\.brokers/],
        [['--set', 'postgres.url='], /postgres\.url/],
        [['--set', 'postgres.url=\n'], /postgres\.url/],
        [['--set', 'redis.url='], /redis\.url/],
        [['--set', 'ruleEngine.replicaCount=-1'], /\/ruleEngine\/replicaCount/],
        [['--set', 'ingest.service.type=External'], /\/ingest\/service\/type/],
        [['--set', 'kafka.brokers[0]=no-port'], /\/kafka\/brokers\/0/],
        // an endpoint without its model would stop every service at start-up
        [['--set', 'models.decision.url=http://decisions:8080'], /models\.decision\.model/],
        [['--set', 'models.reasoning.url=http://reasoning:8000/v1'], /models\.reasoning\.model/],
        [['--set', 'ruleEngine.replicas=3'], /additional propert.*replicas/],
        [['--set', 'secretKey=too-short'], /\/secretKey/],
        // a key listed twice would stop every pod (NEATROOTS_API_KEYS: "have the same key")
        [['--set', 'apiKeys.p=samekey', '--set', 'ingestKeys.p=samekey'], /apiKeys\.p and ingestKeys\.p have the same key/],
        [['--set', 'apiKeys.shop=samekey', '--set', 'ingestKeys.web=samekey'], /apiKeys\.shop and ingestKeys\.web have the same key/],
        [['--set', 'apiKeys.alpha=ops:k1', '--set', 'apiKeys.beta=ops:k1'], /apiKeys\.alpha and apiKeys\.beta have the same key/],
        [['--set', 'ingestKeys.a=agent-1', '--set', 'ingestKeys.b=agent-1'], /ingestKeys\.a and ingestKeys\.b have the same key/],
        [['--kube-version', '1.24.0'], /kubeVersion/],
        // a pattern the review service would refuse at start-up (a crash loop), and a negative number of days
        [['--set', 'config.retention.cron=hourly'], /\/config\/retention\/cron/],
        [['--set', 'config.retention.spanDays=-1'], /\/config\/retention\/spanDays/],
      ])('%j', (args, message) => {
        const res = helmRun(h, ['template', RELEASE, chart, ...args]);
        expect(res.status).not.toBe(0);
        expect(res.stderr).toMatch(message);
      });
    });

    /** NOTES.txt rendered with these helm arguments (helm template does not render it: as a ConfigMap in a copy of the chart). */
    function withNotes(use: (notes: (args: string[]) => string) => void): void {
      const dir = mkdtempSync(path.join(tmpdir(), 'neatroots-notes-'));
      try {
        const copy = path.join(dir, 'neatroots');
        cpSync(chart, copy, { recursive: true });
        cpSync(path.join(chart, 'templates/NOTES.txt'), path.join(copy, 'notes.txt'));
        writeFileSync(path.join(copy, 'templates/zz-notes.yaml'),
          'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: |\n    {{- tpl (.Files.Get "notes.txt") . | nindent 4 }}\n');
        use((args) => {
          const res = helmRun(h, ['template', RELEASE, copy, '--show-only', 'templates/zz-notes.yaml', ...args]);
          expect(res.stderr).toBe('');
          return String((YAML.parse(res.stdout) as IConfigMap).data?.notes);
        });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }

    it('has NOTES that render for every values file and say how to reach the services', () => {
      withNotes((notesOf) => {
        for (const { files } of SCENARIOS) {
          const notes = notesOf(files.flatMap((f) => ['-f', f]));
          expect(notes).not.toMatch(/<no value>|%!/);
          expect(notes).toMatch(/OTLP/);
          expect(notes).toContain('/readyz');
          expect(notes).toMatch(/partitions/);
        }
      });
    });

    it('has NOTES that warn of no API keys only when no key is given, and give agents ingest keys', () => {
      withNotes((notesOf) => {
        for (const args of [['--set', 'ingestKeys.shop=agent-key'], ['--set', 'apiKeys.shop=full-key'], ['--set', 'apiKeys.shop=full-key', '--set', 'ingestKeys.shop=agent-key'], ['--set', 'secrets.existingSecret=mine']]) {
          const notes = notesOf(args);
          expect({ args, warned: /no API keys/.test(notes) }).toEqual({ args, warned: false });
        }
        const none = notesOf([]);
        expect(none).toMatch(/WARNING: no API keys are set/);
        // the warning's example sets a full key and an agents' key
        expect(none).toMatch(/--set apiKeys\.my-project=/);
        expect(none).toMatch(/--set ingestKeys\.my-project=/);
        // whatever the keys, agents are told to send with an ingest key, as the values or the Secret give one
        for (const args of [[], ['--set', 'apiKeys.shop=full-key']]) {
          expect({ args, notes: notesOf(args) }).toEqual({ args, notes: expect.stringMatching(/Give agents an ingest key[^]*as ingestKeys\.my-project=KEY/) });
        }
        expect(notesOf(['--set', 'secrets.existingSecret=mine'])).toMatch(/Give agents an ingest key[^]*NEATROOTS_API_KEYS: project=key:ingest/);
        // only ingest keys: nothing opens the API, and the notes say so
        expect(notesOf(['--set', 'ingestKeys.shop=agent-key'])).toMatch(/only ingestKeys are set.*\n.*apiKeys/);
        expect(notesOf(['--set', 'apiKeys.shop=full-key', '--set', 'ingestKeys.shop=agent-key'])).not.toMatch(/only ingestKeys/);
      });
    });
  });
}

/**
 * The chart's optional objects, each on and off, and how they wire to the rest: the
 * ServiceMonitor and the PrometheusRule (Prometheus Operator CRDs, so checked here field by
 * field rather than by a Kubernetes schema; the rules' PromQL by Prometheus's own grammar, the
 * one its web UI uses), the NetworkPolicies, the OTLP/HTTP Ingress and the `helm test` Pods;
 * and values.schema.json refusing misspelt values. The objects' Kubernetes schemas are checked
 * by helm.integration.spec.ts (ci/optional-values.yaml). Skips without helm (one line), fails
 * in CI.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { parser as promql } from '@prometheus-io/lezer-promql';
import * as YAML from 'yaml';
import { createMetrics } from '@neatroots/platform';
import { findHelm, repoRoot, skipLine, toolsRequired } from './support';

const chart = path.join(repoRoot, 'helm/neatroots');
const COMPONENTS = ['ingest', 'rule-engine', 'question', 'review', 'api'];

interface Obj {
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  spec?: any;
}

function helmRun(helm: string, args: string[]): { status: number | null; stdout: string; stderr: string } {
  return spawnSync(helm, args, { encoding: 'utf8', cwd: repoRoot });
}

function render(helm: string, sets: string[] = []): Obj[] {
  const r = helmRun(helm, ['template', 'nr', chart, '--namespace', 'neatroots', ...sets.flatMap((s) => ['--set', s])]);
  if (r.status !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return YAML.parseAllDocuments(r.stdout)
    .map((d) => d.toJSON() as Obj | null)
    .filter((o): o is Obj => Boolean(o));
}

const of = (objs: Obj[], kind: string) => objs.filter((o) => o.kind === kind);
const named = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);
const selects = (sel: Record<string, string> = {}, labels: Record<string, string> = {}) => Object.entries(sel).every(([k, v]) => labels[k] === v);

const helm = findHelm();
if (!helm) {
  if (toolsRequired()) throw new Error('helm is needed for the chart checks and NEATROOTS_REQUIRE_SERVICES=1 forbids skipping (run scripts/helm.sh)');
  skipLine('the chart\'s optional objects', 'no helm (run scripts/helm.sh, or set NEATROOTS_HELM)');
}

(helm ? describe : describe.skip)('the chart\'s optional objects', () => {
  const off = helm ? render(helm) : [];
  const on = helm
    ? render(helm, [
      'metrics.serviceMonitor.enabled=true',
      'metrics.serviceMonitor.labels.release=prometheus',
      'metrics.prometheusRule.enabled=true',
      'metrics.prometheusRule.labels.release=prometheus',
      'metrics.prometheusRule.findingDelaySeconds=1.5',
      'networkPolicy.enabled=true',
      'networkPolicy.agentsFrom[0].namespaceSelector.matchLabels.team=agents',
      'networkPolicy.egress[0].to[0].ipBlock.cidr=10.30.0.0/16',
      'ingest.ingress.enabled=true',
    ])
    : [];

  it('renders none of them but the test Pods by default', () => {
    expect(of(off, 'ServiceMonitor')).toEqual([]);
    expect(of(off, 'PrometheusRule')).toEqual([]);
    expect(of(off, 'NetworkPolicy')).toEqual([]);
    expect(of(off, 'Ingress')).toEqual([]);
    expect(of(off, 'Pod')).toHaveLength(COMPONENTS.length);
    expect(of(render(helm!, ['tests.enabled=false']), 'Pod')).toEqual([]);
  });

  it('ServiceMonitor: selects every Service of the release and scrapes its admin port', () => {
    const [sm] = of(on, 'ServiceMonitor');
    expect(sm).toMatchObject({ apiVersion: 'monitoring.coreos.com/v1', metadata: { labels: { release: 'prometheus' } } });
    expect(sm.spec.namespaceSelector).toEqual({ matchNames: ['neatroots'] });
    // honorLabels: the metrics' `service` label (the alerts group by it) is not renamed exported_service
    expect(sm.spec.endpoints).toEqual([{ port: 'admin', path: '/metrics', scheme: 'http', interval: '30s', scrapeTimeout: '10s', honorLabels: true }]);
    const services = of(on, 'Service');
    expect(services.filter((s) => selects(sm.spec.selector.matchLabels, s.metadata.labels)).map((s) => s.metadata.name).sort()).toEqual(
      COMPONENTS.map((c) => `nr-neatroots-${c}`).sort(),
    );
    for (const s of services) expect(s.spec.ports.map((p: { name: string }) => p.name)).toContain('admin');
  });

  it('ServiceMonitor with ingest behind a LoadBalancer: still scrapes every service\'s admin port, none from outside', () => {
    const objs = render(helm!, ['metrics.serviceMonitor.enabled=true', 'ingest.service.type=LoadBalancer', 'api.service.type=NodePort']);
    const [sm] = of(objs, 'ServiceMonitor');
    const selected = of(objs, 'Service').filter((s) => selects(sm.spec.selector.matchLabels, s.metadata.labels));
    for (const c of COMPONENTS) {
      const pods = named(objs, 'Deployment', `nr-neatroots-${c}`)!.spec.template.metadata.labels;
      const scraped = selected.filter((s) => selects(s.spec.selector, pods) && s.spec.ports.some((p: { name: string }) => p.name === 'admin'));
      expect({ c, scraped: scraped.map((s) => [s.metadata.name, s.spec.type ?? 'ClusterIP']) }).toEqual({ c, scraped: [[expect.any(String), 'ClusterIP']] });
    }
    for (const c of ['ingest', 'api']) {
      const outside = named(objs, 'Service', `nr-neatroots-${c}`)!;
      expect(outside.spec.type).not.toBe('ClusterIP');
      expect(outside.spec.ports.map((p: { name: string }) => p.name)).not.toContain('admin');
    }
  });

  it('PrometheusRule: alerts in valid PromQL on metrics the processes register, scoped to the release\'s namespace', async () => {
    const [rule] = of(on, 'PrometheusRule');
    expect(rule).toMatchObject({ apiVersion: 'monitoring.coreos.com/v1', metadata: { name: 'nr-neatroots', labels: { release: 'prometheus' } } });
    const rules: { alert: string; expr: string; for?: string; labels: { severity: string }; annotations: { summary: string; description: string } }[] =
      rule.spec.groups.flatMap((g: { rules: unknown[] }) => g.rules);
    expect(rules.map((r) => r.alert)).toEqual([
      'NeatrootsFindingsSlow', 'NeatrootsConsumerBehind', 'NeatrootsConsumerRestarting', 'NeatrootsSpansRefused',
      'NeatrootsDependencyErrors', 'NeatrootsDeadLetters', 'NeatrootsCheckDisabled', 'NeatrootsModelFailing',
    ]);
    // Every metric the processes serve on /metrics (a histogram as its _bucket, _sum and _count series).
    const registered = new Set<string>();
    for (const m of await createMetrics('t').registry.getMetricsAsJSON()) {
      registered.add(m.name);
      if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) registered.add(m.name + suffix);
    }
    for (const r of rules) {
      // Parsed by Prometheus's grammar: no error node anywhere in the tree.
      const errors: string[] = [];
      promql.parse(r.expr).iterate({ enter: (n) => void (n.type.isError && errors.push(`${n.from}: ${r.expr.slice(n.from, n.from + 20)}`)) });
      expect({ alert: r.alert, errors }).toEqual({ alert: r.alert, errors: [] });
      const used = r.expr.match(/\bneatroots_[a-z_]+/g) ?? [];
      expect(used.length).toBeGreaterThan(0);
      for (const name of used) expect({ alert: r.alert, name, registered: registered.has(name) }).toEqual({ alert: r.alert, name, registered: true });
      // Each series selected is this release's: its namespace.
      const selectors = r.expr.match(/\bneatroots_[a-z_]+\{[^}]*\}/g) ?? [];
      expect(selectors).toHaveLength(used.length);
      for (const sel of selectors) expect(sel).toContain('namespace="neatroots"');
      expect(['warning', 'critical']).toContain(r.labels.severity);
      expect(r.annotations.summary.length).toBeGreaterThan(0);
      expect(r.annotations.description.length).toBeGreaterThan(0);
    }
    // The thresholds and the wait come from the values.
    const byName = Object.fromEntries(rules.map((r) => [r.alert, r]));
    expect(byName.NeatrootsFindingsSlow.expr).toMatch(/kind="rule"\}\[5m\]\)\)\) > 1\.5$/);
    expect(byName.NeatrootsConsumerBehind.expr).toMatch(/ > 10000$/);
    expect(byName.NeatrootsConsumerRestarting.expr).toMatch(/\[15m\]\)\) > 2$/);
    expect(byName.NeatrootsFindingsSlow.for).toBe('10m');
    // A model endpoint failing more than half its requests over 10 minutes (a caller giving up is no failure).
    expect(byName.NeatrootsModelFailing.expr).toMatch(/^\(sum by \(endpoint\) \(rate\(neatroots_model_requests_total\{[^}]*outcome!~"ok\|aborted"\}\[10m\]\)\) \/ sum by \(endpoint\) .* > 0\.5$/);
    const tuned = of(render(helm!, ['metrics.prometheusRule.enabled=true', 'metrics.prometheusRule.for=3m', 'metrics.prometheusRule.consumerLag=5000']), 'PrometheusRule')[0];
    const tunedRules: { alert: string; expr: string; for?: string }[] = tuned.spec.groups.flatMap((g: { rules: unknown[] }) => g.rules);
    expect(tunedRules.find((r) => r.alert === 'NeatrootsConsumerBehind')).toMatchObject({ for: '3m', expr: expect.stringMatching(/ > 5000$/) });
    // A broken expression is seen as one: the check above can fail.
    const broken: string[] = [];
    promql.parse('sum by (le (rate(neatroots_consumer_lag[5m])) >').iterate({ enter: (n) => void (n.type.isError && broken.push(n.name)) });
    expect(broken.length).toBeGreaterThan(0);
  });

  it('NetworkPolicies: each service takes only the ports it serves, from whom it serves', () => {
    const pods = (c: string) => named(on, 'Deployment', `nr-neatroots-${c}`)!.spec.template;
    for (const c of COMPONENTS) {
      const np = named(on, 'NetworkPolicy', `nr-neatroots-${c}`)!;
      const tpl = pods(c);
      // selects its own pods and no other service's
      expect(selects(np.spec.podSelector.matchLabels, tpl.metadata.labels)).toBe(true);
      for (const other of COMPONENTS.filter((o) => o !== c)) expect(selects(np.spec.podSelector.matchLabels, pods(other).metadata.labels)).toBe(false);
      expect(np.spec.policyTypes).toEqual(['Ingress', 'Egress']);
      // every port it lets in is a port the container names, and every port the container names is let in
      const allowed = np.spec.ingress.flatMap((r: { ports: { port: string }[] }) => r.ports.map((p) => p.port)).sort();
      const named_ = tpl.spec.containers[0].ports.map((p: { name: string }) => p.name).sort();
      expect({ c, allowed }).toEqual({ c, allowed: named_ });
      const fromOf = (port: string) => np.spec.ingress.find((r: { ports: { port: string }[] }) => r.ports.some((p) => p.port === port)).from;
      if (c === 'review' || c === 'question' || c === 'rule-engine') {
        // internal gRPC: this release's pods alone
        expect(fromOf('grpc')).toEqual([{ podSelector: { matchLabels: { 'app.kubernetes.io/instance': 'nr', 'app.kubernetes.io/part-of': 'neatroots' } } }]);
        for (const caller of COMPONENTS) expect(selects(fromOf('grpc')[0].podSelector.matchLabels, pods(caller).metadata.labels)).toBe(true);
      }
      if (c === 'ingest') for (const p of ['otlp', 'otlp-http', 'grpc']) expect(fromOf(p)).toEqual([{ namespaceSelector: { matchLabels: { team: 'agents' } } }]);
      if (c === 'api') expect(fromOf('http')).toBeUndefined(); // apiFrom empty: anyone
      expect(np.spec.egress).toContainEqual({ to: [{ ipBlock: { cidr: '10.30.0.0/16' } }] });
    }
    // with metricsFrom, the admin port takes those peers and this release's pods: the helm test Pods ask /readyz there
    const limited = render(helm!, ['networkPolicy.enabled=true', 'networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring']);
    const testPods = of(limited, 'Pod');
    expect(testPods).toHaveLength(COMPONENTS.length);
    for (const c of COMPONENTS) {
      const np = named(limited, 'NetworkPolicy', `nr-neatroots-${c}`)!;
      const adminFrom: { podSelector?: { matchLabels: Record<string, string> }; namespaceSelector?: unknown }[] =
        np.spec.ingress.find((r: { ports: { port: string }[] }) => r.ports.some((p) => p.port === 'admin')).from;
      expect(adminFrom).toContainEqual({ namespaceSelector: { matchLabels: { team: 'monitoring' } } });
      // a peer with only a podSelector is a pod of the policy's own namespace, where helm test runs its Pods
      const tester = named(limited, 'Pod', `nr-neatroots-${c}-test`)!;
      expect(adminFrom.some((f) => f.podSelector && !f.namespaceSelector && selects(f.podSelector.matchLabels, tester.metadata.labels))).toBe(true);
    }
    // without egress rules, outgoing traffic is left alone
    const ingressOnly = named(render(helm!, ['networkPolicy.enabled=true']), 'NetworkPolicy', 'nr-neatroots-ingest')!;
    expect(ingressOnly.spec.policyTypes).toEqual(['Ingress']);
    expect(ingressOnly.spec.egress).toBeUndefined();
  });

  it('Ingress for OTLP/HTTP: /v1/traces to ingest\'s otlp-http port', () => {
    const ing = named(on, 'Ingress', 'nr-neatroots-ingest')!;
    expect(ing.spec.rules).toEqual([{
      host: 'otlp.neatroots.example.com',
      http: { paths: [{ path: '/v1/traces', pathType: 'Prefix', backend: { service: { name: 'nr-neatroots-ingest', port: { name: 'otlp-http' } } } }] },
    }]);
    const svc = named(on, 'Service', 'nr-neatroots-ingest')!;
    expect(svc.spec.ports).toContainEqual(expect.objectContaining({ name: 'otlp-http', port: 4318, targetPort: 'otlp-http' }));
    expect(named(on, 'Ingress', 'nr-neatroots-api')).toBeUndefined();
  });

  it('helm test Pods: one per service, asking its /readyz through its Service', () => {
    const tests = of(off, 'Pod');
    for (const c of COMPONENTS) {
      const pod = named(tests, 'Pod', `nr-neatroots-${c}-test`)!;
      expect(pod.metadata.annotations?.['helm.sh/hook']).toBe('test');
      expect(pod.spec.restartPolicy).toBe('Never');
      expect(pod.spec.containers[0].env).toEqual([{ name: 'URL', value: `http://nr-neatroots-${c}:9464/readyz` }]);
      const svc = named(off, 'Service', `nr-neatroots-${c}`)!;
      expect(svc.spec.ports).toContainEqual(expect.objectContaining({ name: 'admin', port: 9464 }));
      // behind a LoadBalancer, the Pod asks the ClusterIP Service that carries the admin port
      const lb = render(helm!, [`${{ 'rule-engine': 'ruleEngine' }[c] ?? c}.service.type=LoadBalancer`]);
      const url = new URL(named(lb, 'Pod', `nr-neatroots-${c}-test`)!.spec.containers[0].env[0].value);
      const admin = named(lb, 'Service', url.hostname)!;
      expect(admin.spec.type ?? 'ClusterIP').toBe('ClusterIP');
      expect(admin.spec.ports).toContainEqual(expect.objectContaining({ name: 'admin', port: Number(url.port), targetPort: 'admin' }));
      expect(selects(admin.spec.selector, named(lb, 'Deployment', `nr-neatroots-${c}`)!.spec.template.metadata.labels)).toBe(true);
      // not selected by its service's Deployment or Service
      expect(selects(svc.spec.selector, pod.metadata.labels)).toBe(false);
    }
  });

  it('passes helm lint --strict with all of them on', () => {
    const r = helmRun(helm!, ['lint', '--strict', chart, '--set', 'metrics.serviceMonitor.enabled=true', '--set', 'metrics.prometheusRule.enabled=true', '--set', 'networkPolicy.enabled=true', '--set', 'ingest.ingress.enabled=true']);
    expect(r.stdout + r.stderr).toContain('0 chart(s) failed');
  });

  it.each([
    ['ingest.replicaCont=3', "additional properties 'replicaCont' not allowed"],
    ['networkPolicy.enabeld=true', "additional properties 'enabeld' not allowed"],
    ['metrics.serviceMonitor.interval=soon', 'metrics/serviceMonitor/interval'],
    ['metrics.prometheusRule.for=soon', 'metrics/prometheusRule/for'],
    ['metrics.prometheusRule.consumerLag=0', 'metrics/prometheusRule/consumerLag'],
    ['metrics.prometheusRule.findingDelaySeconds=soon', 'metrics/prometheusRule/findingDelaySeconds'],
    ['ports.otlpHttp=70000', 'ports/otlpHttp'],
    ['ingest.ingress.hosts[0].paths[0].path=v1/traces', 'ingest/ingress/hosts/0/paths/0/path'],
  ])('refuses %s, naming it', (set, message) => {
    const r = helmRun(helm!, ['template', 'nr', chart, '--set', set]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(message);
  });
});

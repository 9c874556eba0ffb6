#!/usr/bin/env node
// Writes helm/neatroots/README.md from helm/neatroots/values.yaml: every value, its default and
// what it does. The description is the comment above the value in values.yaml; the settings
// every service has (replicaCount, resources, ...) are described once, in SERVICE_KEYS below,
// and the few values whose name says it all in OTHER_KEYS. test/deploy/helm-readme.spec.ts
// keeps the README in step and fails on a value with no description.
//   node scripts/helm-readme.js          write the README
//   node scripts/helm-readme.js --check  exit 1 when the README is not what it would write
'use strict';
const fs = require('node:fs');
const path = require('node:path');
// yaml 2 (comments in the document model): the one the checks library depends on; the root's is 1.x.
const YAML = require(require.resolve('yaml', { paths: [path.join(__dirname, '../libs/checks')] }));

const chart = path.join(__dirname, '../helm/neatroots');
const SERVICES = ['ingest', 'ruleEngine', 'question', 'review', 'api'];

/** The settings of each service block, by their path inside it. */
const SERVICE_KEYS = {
  replicaCount: 'Pods of this service (when autoscaling is off).',
  'resources.requests': 'CPU and memory the scheduler reserves for each pod.',
  'resources.limits': 'CPU and memory a pod may use at most.',
  'service.type': 'Kubernetes Service type (`ClusterIP`, `NodePort`, `LoadBalancer`).',
  'service.annotations': 'Annotations on the Service (e.g. for a cloud load balancer).',
  env: 'Extra environment variables for this service only, `{NAME: value}`.',
  terminationGracePeriodSeconds: 'Seconds a pod gets to finish its work after SIGTERM.',
  'pdb.enabled': 'Render a PodDisruptionBudget for this service.',
  'pdb.maxUnavailable': 'Pods the PodDisruptionBudget lets go at once.',
  'autoscaling.enabled': 'Render a HorizontalPodAutoscaler (then replicaCount is not set).',
  'autoscaling.minReplicas': 'Fewest pods the autoscaler keeps.',
  'autoscaling.maxReplicas': 'Most pods the autoscaler starts.',
  'autoscaling.targetCPUUtilizationPercentage': 'Average CPU use, in percent of the request, the autoscaler aims at.',
  'ingress.enabled': 'Render an Ingress for this service.',
  'ingress.className': 'IngressClass of the Ingress (empty: the cluster default).',
  'ingress.annotations': 'Annotations on the Ingress (e.g. for cert-manager or body size limits).',
  'ingress.hosts': 'Hosts and paths the Ingress routes to the service.',
  'ingress.tls': 'TLS secrets and their hosts, `[{secretName, hosts}]`.',
};

/** Values whose comment in values.yaml covers a group, or whose name says it all. */
const OTHER_KEYS = {
  'image.repository': 'Image of every service (`neatroots serve --target NAME`).',
  'image.pullPolicy': 'When the kubelet pulls the image.',
  imagePullSecrets: 'Secrets for pulling the image from a private registry, `[{name}]`.',
  nameOverride: 'Replaces the chart name in object names.',
  fullnameOverride: 'Replaces the full name (release and chart) in object names.',
  'kafka.topicPrefix': 'Prefix of the Kafka topics (NEATROOTS_TOPIC_PREFIX).',
  'models.llm.url': 'The OpenAI-compatible endpoint answering question checks (NEATROOTS_LLM_URL).',
  'models.llm.model': 'Model name sent to that endpoint (NEATROOTS_LLM_MODEL).',
  'models.llm.apiKey': 'Its API key, kept in the Secret (NEATROOTS_LLM_KEY).',
  'models.decision.url': 'The decision model endpoint (NEATROOTS_DECISION_MODEL_URL).',
  'models.decision.apiKey': 'Its API key, kept in the Secret (NEATROOTS_DECISION_MODEL_KEY).',
  'ports.question': 'The question service\'s gRPC port.',
  'ports.review': 'The review service\'s gRPC port.',
  'ports.http': 'The api\'s HTTP port (REST /v1 and the web app).',
  'serviceAccount.create': 'Create a ServiceAccount for the pods.',
  'serviceAccount.annotations': 'Annotations on the ServiceAccount (e.g. a cloud IAM role).',
  podSecurityContext: 'Pod security context of every pod (non-root, seccomp).',
  securityContext: 'Container security context of every container (read-only root, no privilege escalation, no capabilities).',
  'probes.liveness': 'Liveness probe on the admin port: restart a pod whose process stopped answering.',
  'probes.readiness': 'Readiness probe on the admin port: take a pod out of its Service while it cannot serve.',
  'metrics.serviceMonitor.interval': 'How often Prometheus scrapes.',
  'metrics.serviceMonitor.scrapeTimeout': 'How long one scrape may take.',
  'networkPolicy.enabled': 'Render the NetworkPolicies.',
  podAnnotations: 'Annotations on every pod.',
  podLabels: 'Labels on every pod.',
  nodeSelector: 'Node selector of every pod (a service\'s own value wins).',
  tolerations: 'Tolerations of every pod.',
  affinity: 'Affinity of every pod.',
};

/** Leaves: scalars, lists, empty maps and maps written in flow style ({cpu: 1}); probes are one value each. */
function isLeaf(node, key) {
  if (!YAML.isMap(node)) return true;
  if (!node.items.length || node.flow) return true;
  return ['probes.liveness', 'probes.readiness', 'probes.startup', 'podSecurityContext', 'securityContext'].includes(key);
}

function commentOf(pair, map, i) {
  // The comment above a map's first key belongs to the map node in yaml's document model.
  const c = pair.key?.commentBefore ?? pair.commentBefore ?? (i === 0 ? map.commentBefore : undefined) ?? '';
  return c
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^-{3,}/.test(l) && !/^ *#/.test(l))
    .join(' ')
    .trim();
}

function rows() {
  const doc = YAML.parseDocument(fs.readFileSync(path.join(chart, 'values.yaml'), 'utf8'));
  const out = [];
  const walk = (map, prefix, inherited) => {
    map.items.forEach((pair, i) => {
      const key = prefix ? `${prefix}.${pair.key.value}` : String(pair.key.value);
      const own = commentOf(pair, map, i);
      if (isLeaf(pair.value, key)) {
        const [top, ...rest] = key.split('.');
        const service = SERVICES.includes(top) ? SERVICE_KEYS[rest.join('.')] : undefined;
        let description = own || OTHER_KEYS[key] || service || '';
        // A group's comment followed by its values (e.g. "Each: ...") reaches the first value only.
        if (!description && inherited) description = inherited;
        out.push({ key, value: JSON.stringify(pair.value?.toJSON?.() ?? pair.value ?? null), description });
      } else {
        walk(pair.value, key, own && !SERVICES.includes(key) ? own : undefined);
      }
    });
  };
  walk(doc.contents, '', undefined);
  return out;
}

function render() {
  const lines = [
    '# The neatroots chart',
    '',
    'Runs neatroots\'s five services (ingest, rule-engine, question, review, api), each its own',
    'Deployment running `neatroots serve --target NAME`, against your Kafka, Redis and PostgreSQL.',
    '[docs/deployment.md](../../docs/deployment.md) has the walk-through; [sending spans](../../docs/sending-spans.md)',
    'how agents reach ingest.',
    '',
    '```sh',
    'helm install neatroots helm/neatroots --namespace neatroots --create-namespace \\',
    '  --set kafka.brokers={kafka:9092} --set redis.url=redis://redis:6379 \\',
    '  --set postgres.url=postgres://neatroots:secret@postgres:5432/neatroots \\',
    '  --set apiKeys.shop=CHANGE-ME',
    'helm test neatroots --namespace neatroots   # each service\'s /readyz, from a Pod of its own',
    '```',
    '',
    '`values.schema.json` refuses a misspelt or unknown value, and a value of the wrong type,',
    'before anything is rendered.',
    '',
    'Optional objects, all off by default: a `ServiceMonitor` for the Prometheus Operator',
    '(`metrics.serviceMonitor.enabled`), a `PrometheusRule` with alerts on what the metrics say',
    '(`metrics.prometheusRule.enabled`), `NetworkPolicy`s that let each service take only what it',
    'serves (`networkPolicy.enabled`), an Ingress for the api (`api.ingress.enabled`) and one for',
    'OTLP/HTTP (`ingest.ingress.enabled`). The `helm test` Pods are on (`tests.enabled`).',
    '',
    'Memory: each pod\'s `resources.limits.memory` also sizes node\'s heap in it (`heapPercent`, 45%:',
    '`--max-old-space-size` in `NODE_OPTIONS`), so the service collects its garbage before the limit',
    'rather than being killed at it. Each service\'s Kafka consumers bring and decode a bounded amount at',
    'once (`NEATROOTS_KAFKA_FETCH_MAX_BYTES`, `NEATROOTS_KAFKA_BATCH_MAX_BYTES`), so what a service',
    'holds does not grow with a backlog: the defaults were measured to hold a rule engine replaying a',
    'backlog of 300,000 spans within 490 MB of its 1Gi, the other services within 290 MB of their',
    '512Mi ([operations](../../docs/operations.md#memory)). Raise a limit and the heap follows.',
    '',
    '## Values',
    '',
    'Generated from `values.yaml` by `node scripts/helm-readme.js`; do not edit this table by hand.',
    '',
    '| value | default | what it does |',
    '| --- | --- | --- |',
  ];
  const cell = (s) => s.replace(/\|/g, '\\|');
  for (const r of rows()) lines.push(`| \`${r.key}\` | \`${cell(r.value)}\` | ${cell(r.description)} |`);
  return `${lines.join('\n')}\n`;
}

module.exports = { rows, render };

if (require.main === module) {
  const file = path.join(chart, 'README.md');
  const text = render();
  if (process.argv.includes('--check')) {
    const same = fs.existsSync(file) && fs.readFileSync(file, 'utf8') === text;
    if (!same) console.error('helm/neatroots/README.md is not in step with values.yaml: run node scripts/helm-readme.js');
    process.exit(same ? 0 : 1);
  }
  fs.writeFileSync(file, text);
  const missing = rows().filter((r) => !r.description);
  if (missing.length) console.error(`values without a description: ${missing.map((r) => r.key).join(', ')}`);
}

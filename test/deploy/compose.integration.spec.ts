/**
 * docker-compose.yml through Compose itself: `docker compose config` validates the file against
 * the Compose specification, resolves the anchors, merge keys and variables, and needs no Docker
 * engine. The CLI is the docker plugin, or the docker-compose that `scripts/compose.sh` builds
 * with Go. Without one the suite is skipped with one line saying so; with
 * NEATROOTS_REQUIRE_SERVICES=1 (CI) it fails instead.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { findCompose, repoRoot, skipLine, toolsRequired } from './support';

interface ResolvedService {
  image?: string;
  command?: string[];
  environment?: Record<string, string | null>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  ports?: { target: number; published: string; host_ip?: string }[];
}

const file = path.join(repoRoot, 'docker-compose.yml');
const cli = findCompose();

function compose(args: string[], env: Record<string, string> = {}, composeFile = file) {
  const [bin, ...pre] = cli as string[];
  // a clean environment and no .env file, so that a developer's own NEATROOTS_* settings stay out
  const r = spawnSync(bin, [...pre, '-f', composeFile, '--project-directory', repoRoot, '--env-file', '/dev/null', ...args], {
    encoding: 'utf8', cwd: repoRoot, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

if (!cli) {
  const how = 'no `docker compose` plugin or docker-compose binary: run scripts/compose.sh (builds it with Go, a few minutes once)';
  if (toolsRequired()) {
    it('needs docker compose', () => {
      throw new Error(`NEATROOTS_REQUIRE_SERVICES=1 forbids skipping docker compose config: ${how}`);
    });
  } else {
    skipLine('docker compose config (test/deploy/compose.integration.spec.ts)', how);
    it.skip(`docker compose config (${how})`, () => undefined);
  }
} else {
  describe(`docker compose config (${cli.join(' ')})`, () => {
    jest.setTimeout(60_000);

    it('accepts docker-compose.yml with no warning', () => {
      const r = compose(['config', '--quiet']);
      expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    });

    it('resolves it to the topology the unit checks describe', () => {
      const r = compose(['config', '--format', 'json']);
      expect(r.status).toBe(0);
      const resolved = JSON.parse(r.stdout) as { name: string; services: Record<string, ResolvedService>; volumes: Record<string, unknown> };
      expect(resolved.name).toBe('neatroots');
      expect(Object.keys(resolved.services).sort()).toEqual(['api', 'ingest', 'kafka', 'postgres', 'question', 'redis', 'review', 'rule-engine']);
      for (const name of ['ingest', 'rule-engine', 'question', 'review', 'api']) {
        const s = resolved.services[name];
        expect(s.image).toBe('neatroots:local');
        expect(s.command).toEqual(['serve', '--target', name]);
        expect(s.healthcheck?.test).toEqual(['CMD', 'node', '/app/deploy/docker/healthcheck.js', '/readyz']);
        expect(s.environment?.NEATROOTS_API_KEYS).toBe('local=neatroots-local-key');
        expect(s.environment?.NEATROOTS_LLM_URL).toBeNull(); // unset, not empty
        for (const dep of Object.values(s.depends_on ?? {})) expect(dep.condition).toBe('service_healthy');
      }
      // review's retention: unset, so its defaults, unless the shell or .env sets it
      expect(resolved.services.review.environment?.NEATROOTS_SPAN_RETENTION_DAYS).toBeNull();
      // the default key is public (it is in this repository): the ports are for this machine only
      expect(resolved.services.ingest.ports?.map((p) => [p.host_ip, p.target, p.published])).toEqual([['127.0.0.1', 4317, '4317'], ['127.0.0.1', 4318, '4318'], ['127.0.0.1', 50051, '50051']]);
      expect(resolved.services.api.ports?.map((p) => [p.host_ip, p.target, p.published])).toEqual([['127.0.0.1', 8080, '8080']]);
      expect(Object.keys(resolved.volumes).sort()).toEqual(['kafka-data', 'postgres-data', 'redis-data']);
    });

    it('takes the keys, the password, the model endpoint and the retention from the shell', () => {
      const r = compose(['config', '--format', 'json'], {
        NEATROOTS_API_KEYS: 'fleet=k-123', NEATROOTS_PG_PASSWORD: 'pw', NEATROOTS_LLM_URL: 'http://llm:8000/v1',
        NEATROOTS_SPAN_RETENTION_DAYS: '7', NEATROOTS_TRANSCRIPT_RETENTION_DAYS: '90', NEATROOTS_RETENTION_CRON: '5 2 * * *',
      });
      expect(r.status).toBe(0);
      const s = (JSON.parse(r.stdout) as { services: Record<string, ResolvedService> }).services;
      expect(s.review.environment).toMatchObject({
        NEATROOTS_API_KEYS: 'fleet=k-123',
        NEATROOTS_PG_URL: 'postgres://neatroots:pw@postgres:5432/neatroots',
        NEATROOTS_LLM_URL: 'http://llm:8000/v1',
        NEATROOTS_SPAN_RETENTION_DAYS: '7',
        NEATROOTS_TRANSCRIPT_RETENTION_DAYS: '90',
        NEATROOTS_RETENTION_CRON: '5 2 * * *',
      });
      expect(s.postgres.environment?.POSTGRES_PASSWORD).toBe('pw');
    });

    it('publishes the ports on the address NEATROOTS_PUBLISH_ADDRESS names', () => {
      const r = compose(['config', '--format', 'json'], { NEATROOTS_PUBLISH_ADDRESS: '0.0.0.0', NEATROOTS_API_KEYS: 'fleet=k-123' });
      expect(r.status).toBe(0);
      const s = (JSON.parse(r.stdout) as { services: Record<string, ResolvedService> }).services;
      expect([...(s.ingest.ports ?? []), ...(s.api.ports ?? [])].map((p) => `${p.host_ip}:${p.published}`)).toEqual(['0.0.0.0:4317', '0.0.0.0:4318', '0.0.0.0:50051', '0.0.0.0:8080']);
    });

    it('is a real check: a misspelt key fails it', () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'neatroots-compose-'));
      try {
        const bad = path.join(dir, 'docker-compose.yml');
        writeFileSync(bad, readFileSync(file, 'utf8').replace('    start_period: 30s', '    start_perod: 30s'));
        const r = compose(['config', '--quiet'], {}, bad);
        expect(r.status).not.toBe(0);
        expect(r.stderr).toMatch(/start_perod/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

#!/usr/bin/env node
// Container health probe for docker and docker compose (Kubernetes probes the same endpoints
// with httpGet): GET http://127.0.0.1:$NEATROOTS_ADMIN_PORT<path>, exit 0 on a 2xx answer.
//   node deploy/docker/healthcheck.js [/readyz|/healthz]
// The slim base image has no curl or wget; Node's own fetch does the job.
'use strict';

const path = process.argv[2] || '/readyz';
const port = Number(process.env.NEATROOTS_ADMIN_PORT || 9464);
const timeoutMs = Number(process.env.NEATROOTS_HEALTHCHECK_TIMEOUT_MS || 3000);
const url = `http://127.0.0.1:${port}${path.startsWith('/') ? path : `/${path}`}`;

fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).then(
  async (res) => {
    if (res.ok) process.exit(0);
    const body = (await res.text().catch(() => '')).slice(0, 300);
    console.error(`healthcheck: ${url} answered ${res.status}${body ? `: ${body}` : ''}`);
    process.exit(1);
  },
  (err) => {
    console.error(`healthcheck: ${url}: ${err && err.cause ? err.cause.code || err.cause.message : err.message}`);
    process.exit(1);
  },
);

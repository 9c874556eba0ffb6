import { status, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { health } from '@neatroots/proto';

type Status = 'SERVING' | 'NOT_SERVING';

/**
 * grpc.health.v1 for one process: "" is the process as a whole, and each service it runs
 * is listed by its full name (neatroots.v1.Review, ...). Watch streams every change.
 */
export class HealthService {
  private readonly statuses = new Map<string, Status>([['', 'NOT_SERVING']]);
  private readonly watchers = new Set<{ service: string; send(s: Status): void }>();

  set(service: string, s: Status): void {
    this.statuses.set(service, s);
    for (const w of this.watchers) if (w.service === service) w.send(s);
  }

  /** Every service listed is SERVING, and the process too. */
  setAll(s: Status): void {
    for (const k of [...this.statuses.keys()]) this.set(k, s);
  }

  get(service = ''): Status | undefined {
    return this.statuses.get(service);
  }

  definition(): { service: typeof health.HealthService; implementation: UntypedServiceImplementation } {
    const enumOf = (s: Status | undefined) =>
      s === 'SERVING'
        ? health.HealthCheckResponse_ServingStatus.SERVING
        : s === 'NOT_SERVING'
          ? health.HealthCheckResponse_ServingStatus.NOT_SERVING
          : health.HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN;
    const implementation: health.HealthServer = {
      check: (call: ServerUnaryCall<health.HealthCheckRequest, health.HealthCheckResponse>, cb: sendUnaryData<health.HealthCheckResponse>) => {
        const s = this.statuses.get(call.request.service);
        if (s === undefined) cb({ code: status.NOT_FOUND, details: `unknown service ${call.request.service}` });
        else cb(null, { status: enumOf(s) });
      },
      watch: (call: ServerWritableStream<health.HealthCheckRequest, health.HealthCheckResponse>) => {
        const service = call.request.service;
        const w = { service, send: (s: Status) => call.write({ status: enumOf(s) }) };
        w.send(this.statuses.get(service) ?? 'NOT_SERVING');
        this.watchers.add(w);
        call.on('cancelled', () => this.watchers.delete(w));
        call.on('close', () => this.watchers.delete(w));
      },
    };
    return { service: health.HealthService, implementation };
  }
}

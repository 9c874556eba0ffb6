import { NAME_PATTERN } from '@neatroots/sop';
import { SopError, type CalibrateInput } from '@neatroots/store';

/** The calibrate body, {procedure?, dry_run?}: anything else is refused by name (both transports). */
export function calibrateInput(input: unknown): Required<Pick<CalibrateInput, 'dry_run'>> & { procedure: string | null } {
  const o = (input ?? {}) as Record<string, unknown>;
  if (typeof o !== 'object' || Array.isArray(o)) throw new SopError(400, 'invalid_body', 'the body must be a JSON object: {"procedure"?: "take-order", "dry_run"?: true}');
  const extra = Object.keys(o).filter((k) => k !== 'procedure' && k !== 'dry_run');
  if (extra.length) throw new SopError(400, 'invalid_body', `unknown field ${JSON.stringify(extra[0])}: the body is {"procedure"?: string, "dry_run"?: boolean}`);
  if (o.procedure !== undefined && (typeof o.procedure !== 'string' || !NAME_PATTERN.test(o.procedure))) {
    throw new SopError(400, 'invalid_body', `"procedure" must be a procedure id (a-z, 0-9, -), got ${JSON.stringify(o.procedure)}`);
  }
  if (o.dry_run !== undefined && typeof o.dry_run !== 'boolean') throw new SopError(400, 'invalid_body', `"dry_run" must be true or false, got ${JSON.stringify(o.dry_run)}`);
  return { procedure: (o.procedure as string | undefined) ?? null, dry_run: o.dry_run === true };
}

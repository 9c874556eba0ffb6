/**
 * A few constructors for the JSON Schema (OpenAPI 3.1's dialect) the API's document is written
 * in: short enough that each body reads like its docs page. `object` lists every property a
 * body has and requires them all unless told which are optional.
 */
export type Schema = Record<string, unknown>;

export const str: Schema = { type: 'string' };
export const int: Schema = { type: 'integer' };
export const num: Schema = { type: 'number' };
export const bool: Schema = { type: 'boolean' };
export const time: Schema = { type: 'string', format: 'date-time' };
/** Any JSON value (a span's input, a finding's evidence). */
export const any: Schema = {};

export function nullable(s: Schema): Schema {
  return s.$ref ? { anyOf: [s, { type: 'null' }] } : { ...s, type: [s.type as string, 'null'] };
}

export function arr(items: Schema): Schema {
  return { type: 'array', items };
}

export function oneOf(values: readonly string[]): Schema {
  return { type: 'string', enum: [...values] };
}

export function ref(name: string): Schema {
  return { $ref: `#/components/schemas/${name}` };
}

/** An object with these properties, all required but `optional`; others allowed unless `closed`. */
export function object(props: Record<string, Schema>, opts: { optional?: string[]; closed?: boolean; description?: string } = {}): Schema {
  const optional = new Set(opts.optional ?? []);
  return {
    type: 'object',
    ...(opts.description ? { description: opts.description } : {}),
    properties: props,
    required: Object.keys(props).filter((k) => !optional.has(k)),
    ...(opts.closed ? { additionalProperties: false } : {}),
  };
}

/** A string map to one schema (counts per state). */
export function record(keys: readonly string[], value: Schema): Schema {
  return object(Object.fromEntries(keys.map((k) => [k, value])), { closed: true });
}

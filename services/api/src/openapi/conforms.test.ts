/**
 * Checks a JSON value against the document's schemas (the part of JSON Schema the document
 * uses: type, enum, properties, required, additionalProperties: false, items, allOf, anyOf and
 * $ref): the problems found, each with its path in the value. Test support for openapi.spec.ts.
 */
type Schema = Record<string, unknown>;

export function conforms(value: unknown, schema: Schema, schemas: Record<string, Schema>, at = '$'): string[] {
  if (schema.$ref) {
    const name = String(schema.$ref).replace('#/components/schemas/', '');
    const target = schemas[name];
    if (!target) return [`${at}: unknown schema ${name}`];
    return conforms(value, target, schemas, at);
  }
  const problems: string[] = [];
  if (schema.anyOf) {
    const each = (schema.anyOf as Schema[]).map((s) => conforms(value, s, schemas, at));
    if (!each.some((p) => p.length === 0)) problems.push(...each.flat());
    return problems;
  }
  // allOf with the properties beside it: one object, every property named by any part.
  if (schema.allOf) {
    const parts = schema.allOf as Schema[];
    const own = schema.properties ? [{ type: 'object', properties: schema.properties, required: schema.required ?? [] }] : [];
    const merged = [...parts, ...own].map((s) => resolve(s, schemas));
    const closed = merged.some((s) => s.additionalProperties === false);
    const properties = Object.assign({}, ...merged.map((s) => s.properties ?? {})) as Record<string, Schema>;
    const required = merged.flatMap((s) => (s.required as string[] | undefined) ?? []);
    return conforms(value, { type: 'object', properties, required, ...(closed ? { additionalProperties: false } : {}) }, schemas, at);
  }
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? (schema.type as string[]) : [schema.type as string];
    if (!types.some((t) => is(t, value))) return [`${at}: ${JSON.stringify(value)?.slice(0, 80)} is not ${types.join(' or ')}`];
  }
  if (value === null) return problems;
  if (schema.enum && !(schema.enum as unknown[]).includes(value)) problems.push(`${at}: ${JSON.stringify(value)} is not one of ${(schema.enum as unknown[]).join(', ')}`);
  if (typeof value === 'string' && schema.format === 'date-time' && Number.isNaN(Date.parse(value))) problems.push(`${at}: ${value} is not a date-time`);
  if (Array.isArray(value) && schema.items) value.forEach((v, i) => problems.push(...conforms(v, schema.items as Schema, schemas, `${at}[${i}]`)));
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const obj = value as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, Schema>;
    for (const r of (schema.required as string[] | undefined) ?? []) if (!(r in obj)) problems.push(`${at}.${r}: missing`);
    for (const [k, v] of Object.entries(obj)) {
      if (props[k]) problems.push(...conforms(v, props[k], schemas, `${at}.${k}`));
      else if (schema.additionalProperties === false) problems.push(`${at}.${k}: not in the document`);
    }
  }
  return problems;
}

function resolve(s: Schema, schemas: Record<string, Schema>): Schema {
  return s.$ref ? resolve(schemas[String(s.$ref).replace('#/components/schemas/', '')], schemas) : s;
}

function is(type: string, v: unknown): boolean {
  switch (type) {
    case 'null': return v === null;
    case 'string': return typeof v === 'string';
    case 'integer': return Number.isInteger(v);
    case 'number': return typeof v === 'number';
    case 'boolean': return typeof v === 'boolean';
    case 'array': return Array.isArray(v);
    case 'object': return v !== null && typeof v === 'object' && !Array.isArray(v);
    default: return false;
  }
}

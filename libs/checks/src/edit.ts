import { isMap, parseDocument, stringify } from 'yaml';

/**
 * Changes to a check's YAML that keep the rest as written: its comments, keys, order, quoting
 * and block or flow style stay; spacing is printed again (`at_least:    3` becomes
 * `at_least: 3`, runs of blank lines become one). The authoring API sets where a saved check
 * applies and switches a rule to halt this way, and stores the text a person wrote, not a
 * re-serialised copy.
 */

/** The YAML with `path` set to `value`; the text unchanged when it is not one check (a mapping). */
export function setCheckField(text: string, path: readonly string[], value: unknown): string {
  const doc = parseDocument(text);
  if (doc.errors.length || !isMap(doc.contents)) return text;
  doc.setIn(path, value);
  return doc.toString();
}

/** One check's YAML as a plain object (undefined when the text is not a single mapping). */
export function checkObject(text: string): Record<string, unknown> | undefined {
  const doc = parseDocument(text);
  if (doc.errors.length || !isMap(doc.contents)) return undefined;
  return doc.toJS({ maxAliasCount: 100 }) as Record<string, unknown>;
}

/** A check given as an object (the app's editor, an MCP tool), as YAML. */
export function checkYaml(check: Record<string, unknown>): string {
  return stringify(check);
}

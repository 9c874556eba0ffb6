import { isMap, isScalar, LineCounter, parseDocument, type Node } from 'yaml';

/**
 * The line of a check's field in its YAML (1-based), for errors that point into the text as
 * `neatroots checks validate` names the field: "rule.at_least" is the line of at_least under
 * rule. A field that is missing (is required) points at its parent, else at the check itself;
 * undefined when the text is not YAML or holds more than one check.
 */
export function fieldLine(text: string, field: string | undefined): number | undefined {
  const counter = new LineCounter();
  const doc = parseDocument(text, { lineCounter: counter });
  if (doc.errors.length || !isMap(doc.contents)) return undefined;
  let node: Node = doc.contents;
  let line = lineOf(node, counter);
  for (const key of (field ?? '').split('.').filter(Boolean)) {
    if (!isMap(node)) break;
    const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === key);
    if (!pair) break;
    line = lineOf(pair.key as Node, counter) ?? line;
    if (!pair.value || !(pair.value as Node).range) break;
    node = pair.value as Node;
  }
  return line;
}

function lineOf(node: Node, counter: LineCounter): number | undefined {
  return node.range ? counter.linePos(node.range[0]).line : undefined;
}

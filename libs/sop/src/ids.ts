import { createHash } from 'node:crypto';
import type { RuleKind } from './types';

/**
 * Stable ids. A rule's id depends on its kind and text and nothing else (not its position,
 * procedure or release), so results and findings line up across releases for as long as the
 * wording stays; a reworded rule gets a new id (rule lineage links the two).
 *
 *   rule_id = first 16 hex digits of sha256("<kind>\n<text>")
 *   version = first 16 hex digits of sha256(<the file's bytes as UTF-8>)
 *
 * The text is already normalised (whitespace collapsed), so re-indenting or re-wrapping an
 * item keeps its id; any other edit, even of case or punctuation, is a new wording.
 */
export function ruleId(kind: RuleKind, text: string): string {
  return sha256(`${kind}\n${text}`).slice(0, 16);
}

export function contentVersion(content: string): string {
  return sha256(content).slice(0, 16);
}

function sha256(s: string): string {
  return createHash('sha256').update(s, 'utf8').digest('hex');
}

/** Collapses every run of whitespace to one space and trims: the rule-text normal form. */
export function collapse(s: string): string {
  return s.replace(/\s+/g, ' ').trim();
}

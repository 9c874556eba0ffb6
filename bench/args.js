'use strict';
// The benches' command lines: what each takes, checked before anything runs. `--help` prints the
// usage (exit 0); an unknown option, a missing or malformed value, or a stray argument prints
// what is wrong and the usage on standard error, and exits 2. Before, `node bench/e2e.js --help`
// ran for a minute and a half and printed zeros (`--help` read as the span count).
const path = require('node:path');
const { parseArgs } = require('node:util');

class UsageError extends Error {}

/** A count (spans, a rate, seconds): a whole number over 0 (`min` 0: 0 or over). */
function count(value, name, min = 1) {
  const n = Number(value);
  if (!/^\d+$/.test(String(value).trim()) || !Number.isSafeInteger(n) || n < min) throw new UsageError(`${name}: a whole number${min === 0 ? ', 0 or over,' : ' over 0,'} not '${value}'`);
  return n;
}

const NEGATIVE = /^-\d/;

/**
 * A negative number is a value, not an option: `--rate -5` is read as `--rate=-5` and a `-5` on
 * its own as an argument, so the check of that value names it (parseArgs would call the first
 * ambiguous, over three lines, and the second an unknown option). Returns the arguments as
 * parseArgs is to read them, and the negative arguments, each by the placeholder standing for it.
 */
function negativesAsValues(argv, options) {
  const out = [];
  const held = new Map();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      out.push(...argv.slice(i));
      break;
    }
    const name = a.startsWith('--') && !a.includes('=') ? a.slice(2) : null;
    if (name && options[name]?.type === 'string' && NEGATIVE.test(argv[i + 1] ?? '')) out.push(`${a}=${argv[++i]}`);
    else if (NEGATIVE.test(a)) {
      const stand = `\u0000negative${held.size}`;
      held.set(stand, a);
      out.push(stand);
    } else out.push(a);
  }
  return { args: out, held };
}

/**
 * Parses `argv` by `spec`: `options` (name: { type: 'string' | 'boolean', count, min, oneOf, list }),
 * `positionals` (in order: { name, count, min }). `count`: a whole number over 0 (`min: 0`: 0 or
 * over); `oneOf`: one of
 * these values; `list`: comma-separated names, each one of these; `check(values)`: what is wrong
 * with the values together, if anything. Throws UsageError.
 */
function parse(spec, argv) {
  const options = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(spec.options ?? {})) options[name] = { type: o.type ?? 'string' };
  let parsed;
  try {
    const { args, held } = negativesAsValues(argv, options);
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
    parsed.positionals = parsed.positionals.map((p) => held.get(p) ?? p);
  } catch (e) {
    const unknown = e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && /'([^']+)'/.exec(e.message);
    throw new UsageError(unknown ? `unknown option '${unknown[1]}'` : e.message);
  }
  if (parsed.values.help) return { help: true };
  const values = {};
  for (const [name, o] of Object.entries(spec.options ?? {})) {
    const v = parsed.values[name];
    if (v === undefined) continue;
    if (o.count) values[name] = count(v, `--${name}`, o.min);
    else if (o.oneOf) {
      if (!o.oneOf.includes(v)) throw new UsageError(`--${name}: one of ${o.oneOf.join(', ')}, not '${v}'`);
      values[name] = v;
    } else if (o.list) {
      const names = String(v).split(',').map((x) => x.trim()).filter(Boolean);
      const unknown = names.filter((x) => !o.list.includes(x));
      if (unknown.length || !names.length) throw new UsageError(`--${name}: ${unknown.length ? `unknown ${unknown.map((x) => `'${x}'`).join(', ')}` : 'no name given'} (names: ${o.list.join(', ')})`);
      values[name] = names;
    } else values[name] = v;
  }
  const specPos = spec.positionals ?? [];
  if (parsed.positionals.length > specPos.length) throw new UsageError(`unexpected argument '${parsed.positionals[specPos.length]}'`);
  parsed.positionals.forEach((v, i) => {
    values[specPos[i].name] = specPos[i].count ? count(v, specPos[i].name, specPos[i].min) : v;
  });
  // what goes together: spec.check(values) names a wrong combination (a string), or nothing
  const wrong = spec.check?.(values);
  if (wrong) throw new UsageError(wrong);
  return { values };
}

/**
 * The command line of the script being run, by `spec` (with `usage`, its text): the values, or
 * the usage printed and the process ended (--help: 0; a bad command line: 2).
 */
function cli(spec, argv = process.argv.slice(2)) {
  const script = `bench/${path.basename(process.argv[1] ?? 'bench')}`;
  try {
    const r = parse(spec, argv);
    if (r.help) {
      process.stdout.write(`${spec.usage.trim()}\n`);
      process.exit(0);
    }
    return r.values;
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`${script}: ${e.message}\n\n${spec.usage.trim()}\n`);
    process.exit(2);
  }
}

module.exports = { cli, parse, count, UsageError };

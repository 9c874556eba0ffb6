import { parseArgs, UsageError, type FlagSpec } from './args';

const spec: Record<string, FlagSpec> = { name: { value: true }, steering: {}, checks: { value: true, repeat: true }, runs: { value: true }, out: { value: true } };
const usage = (argv: string[]) => {
  try {
    parseArgs(argv, spec);
  } catch (e) {
    if (e instanceof UsageError) return e.message;
    throw e;
  }
  throw new Error(`no usage error for ${argv.join(' ')}`);
};

describe('parseArgs', () => {
  it('takes --flag VALUE, --flag=VALUE, flags with no value, repeatable flags and positionals', () => {
    expect(parseArgs(['a', '--name', 'shop', '--steering', '--checks=x', '--checks', 'y', '--', '--name'], spec)).toEqual({
      flags: { name: 'shop', steering: true, checks: ['x', 'y'] },
      positional: ['a', '--name'],
    });
  });

  it('refuses an option where the value should be: the value was left out, the option not swallowed', () => {
    expect(usage(['--name', '--steering'])).toBe('--name needs a value, got the option --steering; write --name=--steering if you mean it');
    expect(usage(['DIR', '--out', '-v'])).toBe('--out needs a value, got the option -v; write --out=-v if you mean it');
    expect(usage(['--name'])).toBe('--name needs a value');
  });

  it('takes a value that starts with - when it says so, - alone (standard output), and a negative number', () => {
    expect(parseArgs(['--name=--steering'], spec).flags).toEqual({ name: '--steering' });
    expect(parseArgs(['--out', '-'], spec).flags).toEqual({ out: '-' });
    expect(parseArgs(['--runs', '-5'], spec).flags).toEqual({ runs: '-5' });
  });

  it('refuses a flag given twice unless it is repeatable, naming it and not its values', () => {
    expect(usage(['--name', 'a', '--name', 'b'])).toBe('--name given twice: give it once');
    expect(usage(['--out=a.json', '--out', 'b.json'])).toBe('--out given twice: give it once');
    expect(usage(['--steering', '--steering'])).toBe('--steering given twice: give it once');
    expect(parseArgs(['--checks', 'a', '--checks', 'b'], spec).flags).toEqual({ checks: ['a', 'b'] });
  });

  it('knows only the flags of its table, not those every object has', () => {
    expect(usage(['--constructor'])).toBe('unknown option --constructor');
    expect(usage(['--toString=x'])).toBe('unknown option --toString');
  });
});

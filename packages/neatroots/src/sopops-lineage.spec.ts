import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { compileFolder } from '@neatroots/sop';
import { main } from './sopops';

/** Runs `sopops lineage` in-process with captured output. */
async function run(args: string[], cwd: string): Promise<{ code: number; out: string[]; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l), env: {}, cwd };
  const code = await main(['lineage', ...args], io);
  return { code, out, err: err.join('\n') };
}

const takeOrderV1 = `# Take an order
Goal: The order is placed and read back to the caller.

## Steps
1. Greet the caller with the name of the restaurant.
2. Look up the account of the caller. [tool: lookup_account, required]
3. Confirm the delivery address. [when: the caller wants delivery]
4. Read the order back to the caller. [required]

## Never
- Volunteer a price or a description of a dish.

## Warning signs
- The caller sounds upset. -> Offer a callback from the manager.
`;

// Step 1 reworded in place, a step added at 2 (so the rest move down), read-back reworded after
// moving, the address step rewritten past recognition, the never rule unchanged, the warning
// sign's action changed (its text, and so its id, stay).
const takeOrderV2 = `# Take an order
Goal: The order is placed and read back to the caller.

## Steps
1. Greet the caller with the restaurant's name.
2. Ask whether the order is for pickup or delivery.
3. Look up the account of the caller. [tool: lookup_account, required]
4. Find out where the food should go. [when: the caller wants delivery]
5. Read the whole order back to the caller. [required]

## Never
- Volunteer a price or a description of a dish.

## Warning signs
- The caller sounds upset. -> Transfer the call to the manager.
`;

const refund = `# Refund a payment

## Steps
1. Verify the identity of the customer.
2. Issue the refund to the original payment method.
`;

describe('sopops lineage diff', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sopops-lineage-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };

  it('prints one JSON line per rule in the contract shape, with sopc\'s rule ids', async () => {
    write('v1/procedures/take-order.md', takeOrderV1);
    write('v1/procedures/refund.md', refund);
    write('v2/procedures/take-order.md', takeOrderV2);
    write('v2/procedures/returns.md', '# Take a return\n\n## Steps\n1. Accept the parcel.\n');
    const r = await run(['diff', 'v1', 'v2'], dir);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const rows = r.out.map((l) => JSON.parse(l));
    for (const row of rows) expect(Object.keys(row)).toEqual(['procedure_id', 'kind', 'old_rule_id', 'new_rule_id', 'old_text', 'new_text', 'how', 'similarity']);

    // The ids are sopc's, looked up by text in each compiled folder.
    const ids = (folder: string) => new Map(compileFolder(path.join(dir, folder)).procedures.flatMap((p) => p.rules.map((x) => [`${p.procedure_id}/${x.text}`, x.rule_id])));
    const [v1, v2] = [ids('v1'), ids('v2')];
    const id = (m: Map<string, string>, key: string | null) => (key === null ? null : (m.get(key) ?? `missing ${key}`));
    expect(rows.map((x) => [x.procedure_id, x.kind, x.how, x.old_text, x.new_text])).toEqual([
      ['refund', 'step', 'removed', 'Verify the identity of the customer.', null],
      ['refund', 'step', 'removed', 'Issue the refund to the original payment method.', null],
      ['returns', 'step', 'new', null, 'Accept the parcel.'],
      ['take-order', 'step', 'matched', 'Greet the caller with the name of the restaurant.', "Greet the caller with the restaurant's name."],
      ['take-order', 'step', 'new', null, 'Ask whether the order is for pickup or delivery.'],
      ['take-order', 'step', 'same', 'Look up the account of the caller.', 'Look up the account of the caller.'],
      ['take-order', 'step', 'new', null, 'Find out where the food should go.'],
      ['take-order', 'step', 'matched', 'Read the order back to the caller.', 'Read the whole order back to the caller.'],
      ['take-order', 'step', 'removed', 'Confirm the delivery address.', null],
      ['take-order', 'never', 'same', 'Volunteer a price or a description of a dish.', 'Volunteer a price or a description of a dish.'],
      ['take-order', 'warning', 'same', 'The caller sounds upset.', 'The caller sounds upset.'],
    ]);
    for (const x of rows) {
      expect(x.old_rule_id).toBe(id(v1, x.old_text === null ? null : `${x.procedure_id}/${x.old_text}`));
      expect(x.new_rule_id).toBe(id(v2, x.new_text === null ? null : `${x.procedure_id}/${x.new_text}`));
    }
    expect(rows.map((x) => x.similarity)).toEqual([null, null, null, 1, null, 1, null, 0.8, null, 1, 1]);
  });

  it('exits 2 with sopc\'s errors, one a line, when a folder does not compile', async () => {
    write('v1/procedures/take-order.md', takeOrderV1);
    write('v2/procedures/take-order.md', takeOrderV1.replace('## Never', '## Sometimes'));
    const r = await run(['diff', 'v1', 'v2'], dir);
    expect(r.code).toBe(2);
    expect(r.out).toEqual([]);
    expect(r.err).toContain('v2 does not compile');
    expect(r.err).toMatch(/^procedures\/take-order\.md:10: .*Sometimes/m);
  });

  it('exits 2 naming a folder that is not there', async () => {
    write('v1/procedures/take-order.md', takeOrderV1);
    const r = await run(['diff', 'v1', 'nope'], dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('nope');
  });

  it('exits 2 on a wrong command line', async () => {
    expect((await run(['diff', 'v1'], dir)).err).toContain('two folders');
    expect((await run(['rebase', 'a', 'b'], dir)).err).toContain('unknown subcommand');
  });
});

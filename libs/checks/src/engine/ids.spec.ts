import { findingId } from './ids';

describe('findingId', () => {
  // Stored findings are keyed by these ids: a redelivered batch must write the same ones, across
  // versions and Node releases (crypto.hash where Node has it, a Hash object where it does not).
  it('is the first 24 hex digits of the SHA-1 of project, run, check and anchor', () => {
    expect(findingId('bench', 'run-1', 'repeated-tool-call', 'streak:s3')).toBe('d4386b5f871087a94010ac6e');
  });
});

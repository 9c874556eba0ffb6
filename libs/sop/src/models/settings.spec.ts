import { DEFAULT_DECISIONS, inBand, loadSopSettings, SopSettingsError } from './settings';

describe('loadSopSettings', () => {
  it('has documented defaults', () => {
    expect(loadSopSettings({})).toEqual({ decisions: DEFAULT_DECISIONS, mode: 'decide', review: true, subjectChars: 16_000 });
    expect(DEFAULT_DECISIONS.review_statuses).toEqual(['skipped', 'violated', 'unheeded']);
  });

  it('merges SOPOPS_DECISIONS over the defaults, and reads the mode and review switch', () => {
    const s = loadSopSettings({ SOPOPS_DECISIONS: '{"never": [0.05, 0.95, 0.6], "goal": [0.4, 0.6], "review_statuses": ["violated"]}', SOPOPS_CHECK_MODE: 'review', SOPOPS_CHECK_REVIEW: 'off' });
    expect(s.decisions.bands.never).toEqual([0.05, 0.95, 0.6]);
    expect(s.decisions.bands.step).toEqual(DEFAULT_DECISIONS.bands.step);
    expect(s.decisions.goal).toEqual([0.4, 0.6]);
    expect(s.decisions.review_statuses).toEqual(['violated']);
    expect(s).toMatchObject({ mode: 'review', review: false });
  });

  it('reads SOPOPS_SUBJECT_CHARS, the most characters of a session the models read', () => {
    expect(loadSopSettings({ SOPOPS_SUBJECT_CHARS: '100000' }).subjectChars).toBe(100_000);
  });

  it.each([
    [{ SOPOPS_DECISIONS: '{"step": [0.2, 0.8' }, 'SOPOPS_DECISIONS: is not valid JSON'],
    [{ SOPOPS_DECISIONS: '{"step": [0.8, 0.2, 0.5]}' }, 'SOPOPS_DECISIONS.step: no must be under yes'],
    [{ SOPOPS_DECISIONS: '{"never": [0.2, 0.8, 0.9]}' }, 'SOPOPS_DECISIONS.never: decide must be between no and yes'],
    [{ SOPOPS_DECISIONS: '{"route": [0.2, 1.5, 0.5]}' }, 'SOPOPS_DECISIONS.route[1]: a probability is at most 1'],
    [{ SOPOPS_DECISIONS: '{"steps": [0.2, 0.8, 0.5]}' }, 'SOPOPS_DECISIONS: Unrecognized key(s) in object: \'steps\''],
    [{ SOPOPS_DECISIONS: '{"review_statuses": ["wrong"]}' }, 'SOPOPS_DECISIONS.review_statuses[0]:'],
    [{ SOPOPS_CHECK_MODE: 'fast' }, 'SOPOPS_CHECK_MODE: expected decide or review, got "fast"'],
    [{ SOPOPS_CHECK_REVIEW: 'maybe' }, 'SOPOPS_CHECK_REVIEW: expected on or off, got "maybe"'],
    [{ SOPOPS_SUBJECT_CHARS: '500' }, 'SOPOPS_SUBJECT_CHARS: expected a whole number of characters, at least 1000, got "500"'],
    [{ SOPOPS_SUBJECT_CHARS: '16k' }, 'SOPOPS_SUBJECT_CHARS: expected a whole number of characters, at least 1000, got "16k"'],
  ])('names the variable and what is wrong: %j', (env, message) => {
    expect(() => loadSopSettings(env)).toThrow(SopSettingsError);
    expect(() => loadSopSettings(env)).toThrow(message);
  });

  it('reports every problem at once', () => {
    try {
      loadSopSettings({ SOPOPS_CHECK_MODE: 'x', SOPOPS_CHECK_REVIEW: 'y' });
      throw new Error('accepted');
    } catch (e) {
      expect((e as SopSettingsError).problems).toHaveLength(2);
    }
  });
});

describe('inBand', () => {
  const band = [0.2, 0.8, 0.5] as const;
  it.each([
    [0, false, true],
    [0.2, false, true],
    [0.3, false, false],
    [0.5, true, false],
    [0.79, true, false],
    [0.8, true, true],
    [1, true, true],
  ])('p=%d: answer %s, sure %s', (p, answer, sure) => {
    expect(inBand(p, band)).toEqual({ answer, sure });
  });
});

import type { ReviewQueries } from '@neatroots/store';
import { AuthoringError } from '@neatroots/api';
import { createAuthoring } from './authoring';

describe('drafting in a process without the question service', () => {
  it('is refused as not served (503 not_served, which carries no Retry-After), not as a service away a moment', async () => {
    const authoring = createAuthoring({
      data: { checkRecords: async () => [], putCheck: async () => undefined, deleteCheck: async () => false },
      queries: {} as ReviewQueries,
      checks: { loaded: () => ({ checks: [], errors: [], overrides: [] }) as never, reload: async () => undefined },
    });
    const refused = await authoring.draft('shop', 'the agent refunds without asking').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(AuthoringError);
    expect(refused).toMatchObject({ status: 503, code: 'not_served', message: 'drafting is not served by this process (no question service in its configuration)' });
  });
});

import { credentials, Metadata, Server, ServerCredentials, status, type ServiceError } from '@grpc/grpc-js';
import { v1 } from '@neatroots/proto';
import { SopError, type ReviewSopQueries, type SopQueries } from '@neatroots/store';
import { SOP_ERROR_CODE, sopGrpcService } from './grpc';

/**
 * A query that refuses before it returns a promise (the review service's GitHub connections
 * when NEATROOTS_SECRET_KEY is not set: SuggestionsService.around's noGitHub; the review side
 * when this process does not serve it) is answered with its SopError's status, as a rejected
 * one is: the api gives the user the same 404 as in-process, not a 500 `internal error`.
 */
describe('neatroots.v1.Sop: a refusal thrown before the query returns a promise', () => {
  const servers: Server[] = [];
  const clients: v1.SopClient[] = [];

  afterAll(() => {
    for (const c of clients) c.close();
    for (const s of servers) s.forceShutdown();
  });

  async function serve(review: ReviewSopQueries | undefined): Promise<v1.SopClient> {
    const server = new Server();
    servers.push(server);
    const { service, implementation } = sopGrpcService({} as SopQueries, review);
    server.addService(service, implementation);
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
    const client = new v1.SopClient(`127.0.0.1:${port}`, credentials.createInsecure());
    clients.push(client);
    return client;
  }

  function getRepoConnection(client: v1.SopClient): Promise<{ code: status; details: string; errorCode: unknown }> {
    return new Promise((resolve, reject) =>
      client.getRepoConnection({ workspace: 'shop', id: '', query_json: '{}', body_json: '' }, new Metadata(), { deadline: new Date(Date.now() + 10_000) }, (err: ServiceError | null) =>
        err ? resolve({ code: err.code, details: err.details, errorCode: err.metadata.get(SOP_ERROR_CODE)[0] }) : reject(new Error('answered, not refused')),
      ),
    );
  }

  it('answers GitHub connections that are off NOT_FOUND with the error code and words', async () => {
    const review = {
      getRepoConnection: (): never => {
        throw new SopError(404, 'not_found', 'GitHub connections are not served by this review service');
      },
    } as unknown as ReviewSopQueries;
    await expect(getRepoConnection(await serve(review))).resolves.toEqual({
      code: status.NOT_FOUND,
      details: 'GitHub connections are not served by this review service',
      errorCode: 'not_found',
    });
  });

  it('answers a process without the review side NOT_FOUND', async () => {
    await expect(getRepoConnection(await serve(undefined))).resolves.toEqual({
      code: status.NOT_FOUND,
      details: 'the review side is not served by this process',
      errorCode: 'not_found',
    });
  });

  it('answers any other error thrown at once INTERNAL with its words', async () => {
    const review = {
      getRepoConnection: (): never => {
        throw new Error('boom');
      },
    } as unknown as ReviewSopQueries;
    await expect(getRepoConnection(await serve(review))).resolves.toMatchObject({ code: status.INTERNAL, details: 'review (sop): boom' });
  });
});

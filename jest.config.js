// One jest for the whole repo. The test tier is in the file name:
//   *.spec.ts               unit, beside the code, no outside service
//   *.integration.spec.ts   against real services (Kafka, Redis, Postgres, gRPC servers, model endpoints)
// Tests import the TypeScript sources of the other packages, never their build output.
const swc = ['@swc/jest', {
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    target: 'es2022',
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
}];
const moduleNameMapper = {
  '^@neatroots/(proto|spans|ports|checks|store|platform|questions|messages|sop)$': '<rootDir>/libs/$1/src',
  '^@neatroots/review-domain$': '<rootDir>/libs/review/src',
  '^@neatroots/(ingest|rule-engine|question|review|api)$': '<rootDir>/services/$1/src',
  '^@neatroots/sdk$': '<rootDir>/packages/sdk/src',
  '^neatroots$': '<rootDir>/packages/neatroots/src',
};
const common = {
  rootDir: __dirname,
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper,
  testEnvironment: 'node',
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};
module.exports = {
  // PGlite takes seconds to start under jest; real services take longer to join a group.
  testTimeout: 60_000,
  // A worker that grew past this between two test files is replaced. Test files that boot the
  // embedded app (PGlite, the durable log, gRPC servers) leave a worker large, and ingest's
  // memory ceiling (NEATROOTS_MEMORY_CEILING_MB) reads the process's RSS: in a grown worker the
  // next file's exports would be refused for memory another file left behind.
  workerIdleMemoryLimit: '600MB',
  projects: [
    { ...common, displayName: 'unit', testMatch: ['<rootDir>/{libs,services,packages}/*/src/**/*.spec.ts', '<rootDir>/test/**/*.spec.ts'],
      testPathIgnorePatterns: [...common.testPathIgnorePatterns, '\\.integration\\.spec\\.ts$'] },
    { ...common, displayName: 'integration', testMatch: ['<rootDir>/{libs,services,packages}/*/src/**/*.integration.spec.ts', '<rootDir>/test/**/*.integration.spec.ts'],
      // Where no address is given and Docker is reachable, testcontainers starts the services.
      globalSetup: '<rootDir>/test/containers.global-setup.ts', globalTeardown: '<rootDir>/test/containers.global-teardown.ts' },
  ],
};

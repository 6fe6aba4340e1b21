import react from '@vitejs/plugin-react';
import { defineConfig } from 'vitest/config';

// `unit` runs in-process against app.inject() and temporary SQLite files, needing no service;
// `web` renders the dashboard's components in jsdom; `services` runs in-process against the real
// services of docs/SERVICES.md; `e2e` starts real `tailwater serve` processes (and real services).
/** The suites that run on every backend pair: they use only the Store and Bus ports. */
const BACKEND_SUITES = [
  'test/unit/native-stream.test.ts',
  'test/unit/engine-rules.test.ts',
  'test/unit/hub-start.test.ts',
  'test/unit/http-api.test.ts',
  'test/unit/log-range.test.ts',
  'test/unit/log-prefix.test.ts',
  'test/unit/log-lines.test.ts',
  'test/unit/compat-openmetadata.test.ts',
  'test/unit/compat-zenml.test.ts',
  'test/unit/compat-freight.test.ts',
  'test/unit/compat-iceberg.test.ts',
  'test/unit/store-epoch-cursors.test.ts',
  'test/unit/engine-store-outage.test.ts',
  'test/unit/http-bad-input.test.ts',
  'test/unit/retention.test.ts',
  'test/unit/trust-proxy.test.ts',
  'test/unit/log-text-nul.test.ts',
  'test/unit/auth.test.ts',
  'test/unit/auth-streams.test.ts',
  'test/unit/run-delete.test.ts',
  'test/unit/run-retention.test.ts',
  'test/unit/pipeline-stats.test.ts',
  'test/unit/http-search.test.ts',
  'test/unit/openapi.test.ts',
  'test/unit/otlp-ingest.test.ts',
  'test/unit/sealed-streams.test.ts',
];

/**
 * Unit files that judge this process's event loop (how late timers fire, its delay under load):
 * each in a fresh process. In a worker shared with the files before it, seal-loop's 30 ms waits
 * took about 180 ms in two runs of three (no file was found to leave work running: after each
 * one, the loop was idle and timers on time, so likely pauses to collect the heap the files
 * before had grown); isolated, it passed every time.
 */
const UNIT_ISOLATED = ['test/unit/seal-loop.test.ts', 'test/unit/fuzz-routes.test.ts'];

/**
 * e2e files that run alone, after everything else, one at a time: stomp-source stops and starts
 * the shared ActiveMQ, which stomp-fleet needs up all along; the others load the machine hard
 * (failover's outages under a stream of appends, hostile-clients' 40 MB bodies and 300,000-entry
 * reads, replicas' fleet behind nginx, viewer-memory's 11,000 sockets) and would slow every file
 * beside them.
 */
const E2E_ALONE = [
  'test/e2e/stomp-source.test.ts',
  'test/e2e/stomp-fleet.test.ts',
  'test/e2e/failover.test.ts',
  'test/e2e/hostile-clients.test.ts',
  'test/e2e/replicas.test.ts',
  'test/e2e/viewer-memory.test.ts',
];

const e2eOptions = {
  // The slow-viewer test measures memory after a full collection.
  execArgv: ['--expose-gc'],
  testTimeout: 120_000,
  hookTimeout: 60_000,
  // A browser's view of a live stream settles when it settles: a poll waits as a waitFor does.
  expect: { poll: { timeout: 10_000 } },
};

export default defineConfig({
  test: {
    // Files run side by side, more of them than the cores: most of a file's time is waiting
    // (for a server to start, a stream to end, a browser to draw), and each file has its own
    // servers, temporary directories, databases and Redis namespaces (test/helpers/backends.ts).
    maxWorkers: 3,
    reporters: ['default', './test/timing-reporter.ts', './test/summary-reporter.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          exclude: UNIT_ISOLATED,
          // Each worker imports the modules once for all its files, not once per file: a third
          // of this project's time was imports. Every file makes its own apps and stores.
          isolate: false,
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'unit-isolated',
          include: UNIT_ISOLATED,
          testTimeout: 20_000,
        },
      },
      {
        plugins: [react()],
        test: {
          name: 'web',
          environment: 'jsdom',
          include: ['web/test/**/*.test.{ts,tsx}'],
          setupFiles: ['web/test/setup.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          // In-process tests against real services (Redis, …) that scripts/services.sh starts.
          name: 'services',
          include: ['test/services/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          // The engine, native-stream, HTTP and dialect suites again, on PostgreSQL and Redis
          // (test/helpers/backends.ts): every behaviour they check holds on both backend pairs.
          name: 'postgres+redis',
          include: BACKEND_SUITES,
          isolate: false,
          env: { TAILWATER_TEST_BACKEND: 'postgres+redis' },
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          exclude: E2E_ALONE,
          ...e2eOptions,
        },
      },
      {
        test: {
          name: 'e2e-alone',
          include: E2E_ALONE,
          fileParallelism: false,
          ...e2eOptions,
        },
      },
    ],
  },
});

import react from '@vitejs/plugin-react';
import { defineConfig } from 'vitest/config';

// Two projects: `unit` runs in-process against app.inject() and temporary SQLite files;
// `web` renders the dashboard's components in jsdom; `e2e` starts real `tailwater serve` processes (and, later, real services).
export default defineConfig({
  test: {
    reporters: ['default', './test/summary-reporter.ts'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
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
          name: 'e2e',
          // The slow-viewer test measures memory after a full collection.
          execArgv: ['--expose-gc'],
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
    ],
  },
});

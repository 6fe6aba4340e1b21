import type { Reporter, SerializedError, TestModule } from 'vitest/node';

/**
 * Prints one closing line, `N passed, N failed, N skipped`, that CI reads as the run's
 * verdict (Vitest's own summary is in another shape). A file that fails before its tests run
 * (an error while collecting, or in a hook outside any test) has no failed test to count, so
 * each such error counts as one failure, as does each error Vitest caught outside every test:
 * the line must never say "0 failed" of a run that failed.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(
    testModules: ReadonlyArray<TestModule>,
    unhandledErrors: ReadonlyArray<SerializedError>,
  ): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const module of testModules) {
      failed += module.errors().length;
      for (const suite of module.children.allSuites()) failed += suite.errors().length;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
        else skipped += 1;
      }
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}

import { writeFileSync } from 'node:fs';
import type { Reporter, TestModule } from 'vitest/node';

/** How many of the slowest files the closing table names. */
const SLOWEST = 20;

/**
 * Prints where the suite's time went: each project's summed file time and the slowest files,
 * each with its own time (collect + tests + hooks). A suite that must answer in minutes needs
 * its cost visible on every run, not found by hand once it has grown.
 * `TAILWATER_TEST_TIMES=<file>` also writes every file's time there, tab-separated, so two
 * runs can be compared.
 */
export default class TimingReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const rows = testModules.map((module) => {
      const d = module.diagnostic();
      return {
        project: module.project.name,
        file: module.relativeModuleId,
        ms: d.collectDuration + d.setupDuration + d.duration,
      };
    });
    if (rows.length === 0) return;
    const byProject = new Map<string, { ms: number; files: number }>();
    for (const row of rows) {
      const total = byProject.get(row.project) ?? { ms: 0, files: 0 };
      total.ms += row.ms;
      total.files += 1;
      byProject.set(row.project, total);
    }
    const s = (ms: number): string => (ms / 1000).toFixed(1).padStart(7);
    const lines = ['', 'Time per project (sum of its files):'];
    for (const [project, total] of byProject) {
      lines.push(`${s(total.ms)} s  ${project} (${total.files} files)`);
    }
    lines.push(`Slowest files:`);
    for (const row of [...rows].sort((a, b) => b.ms - a.ms).slice(0, SLOWEST)) {
      lines.push(`${s(row.ms)} s  ${row.project}  ${row.file}`);
    }
    process.stdout.write(`${lines.join('\n')}\n`);
    const out = process.env.TAILWATER_TEST_TIMES;
    if (out) {
      const tsv = rows.map((r) => `${r.project}\t${r.file}\t${Math.round(r.ms)}`).join('\n');
      writeFileSync(out, `${tsv}\n`);
    }
  }
}

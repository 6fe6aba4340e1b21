/** `npm run bench`: every benchmark, or those named on the command line (e.g. `ingest`). */
import { benchDashboard } from './dashboard.js';
import { benchFanout } from './fanout.js';
import { benchHardening } from './hardening.js';
import { benchIdleMemory } from './idle-memory.js';
import { benchIngest } from './ingest.js';
import { benchLatency } from './latency.js';

const benches: Record<string, () => Promise<void>> = {
  ingest: benchIngest,
  fanout: benchFanout,
  latency: benchLatency,
  'idle-memory': benchIdleMemory,
  dashboard: benchDashboard,
  hardening: benchHardening,
};
const wanted = process.argv.slice(2);
for (const [name, run] of Object.entries(benches)) {
  if (wanted.length > 0 && !wanted.includes(name)) continue;
  // It needs a build of the code before issue 11 (BENCH_BEFORE); asked for by name, it says how.
  if (name === 'hardening' && wanted.length === 0 && !process.env['BENCH_BEFORE']) {
    console.log(
      '# hardening: not run (it compares with the build before issue 11: see bench/hardening.ts)',
    );
    continue;
  }
  console.log(`# ${name}`);
  await run();
}

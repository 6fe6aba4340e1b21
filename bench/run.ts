/**
 * `npm run bench`: every benchmark, or those named on the command line (e.g. `ingest`, or
 * `npm run bench -- replicas`); each replaces only its own section of docs/BENCHMARKS.md.
 */
import { benchAuth } from './auth.js';
import { benchCatchup } from './catchup.js';
import { benchDashboard } from './dashboard.js';
import { benchFanout, benchFanout10k } from './fanout.js';
import { benchHardening } from './hardening.js';
import { benchIdleMemory } from './idle-memory.js';
import { benchIngest } from './ingest.js';
import { benchLatency } from './latency.js';
import { missingPeers } from './peer-streams.js';
import { benchPeers } from './peers.js';
import { benchReplicas, missingServices } from './replicas.js';
import { benchSearch } from './search.js';
import { benchSearchSealed } from './search-sealed.js';
import { benchStoreReads } from './store-reads.js';
import { benchStorage } from './storage.js';

const benches: Record<string, () => Promise<void>> = {
  ingest: benchIngest,
  fanout: benchFanout,
  'fanout-10k': benchFanout10k,
  latency: benchLatency,
  catchup: benchCatchup,
  'store-reads': benchStoreReads,
  'idle-memory': benchIdleMemory,
  dashboard: benchDashboard,
  hardening: benchHardening,
  auth: benchAuth,
  replicas: benchReplicas,
  search: benchSearch,
  'search-sealed': benchSearchSealed,
  storage: benchStorage,
  peers: benchPeers,
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
  // It needs PostgreSQL, Redis and nginx (`npm run services`); asked for by name, it fails.
  if (name === 'replicas' && wanted.length === 0) {
    const missing = await missingServices();
    if (missing.length > 0) {
      console.log(`# replicas: not run (${missing.join(', ')} not reachable: npm run services)`);
      continue;
    }
  }
  // It needs nchan and Pushpin (`bash scripts/services.sh --peers`); asked for by name, it fails.
  if (name === 'peers' && wanted.length === 0 && missingPeers().length > 0) {
    console.log(
      `# peers: not run (${missingPeers().join(', ')} missing: bash scripts/services.sh --peers)`,
    );
    continue;
  }
  console.log(`# ${name}`);
  await run();
}

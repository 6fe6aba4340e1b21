import type { Hub } from '../engine/hub.js';
import type { Ingest } from '../engine/ingest.js';
import type { Settings } from '../model/settings.js';
import type { Store } from '../store/store.js';

/** What the HTTP app is built from; `buildApp` creates nothing global of its own. */
export interface AppDeps {
  store: Store;
  hub: Hub;
  ingest: Ingest;
  settings: Settings;
  /** The state of the bus between replicas, for /readyz (always up without one). */
  busHealth?: () => { state: 'up' | 'degraded' | 'down'; detail?: string | undefined };
  /** The state of each non-HTTP source, for /readyz. */
  sourceStatus?: () => ReadonlyArray<{
    name: string;
    state: string;
    lastError?: string | undefined;
  }>;
}

import type { Settings } from '../model/settings.js';
import type { Store, TrimPolicy } from './store.js';

export type RetentionSettings = Pick<
  Settings,
  'topicMaxEntries' | 'topicMaxAgeSeconds' | 'retentionIntervalSeconds' | 'retention'
>;

/** A topic's policy: its own override where the config file gives one, else the defaults. */
export function retentionPolicy(
  topic: string,
  settings: RetentionSettings,
  now: number,
): TrimPolicy {
  const own = settings.retention[topic] ?? {};
  const maxEntries = own.maxEntries ?? settings.topicMaxEntries;
  const maxAgeSeconds = own.maxAgeSeconds ?? settings.topicMaxAgeSeconds;
  return {
    maxEntries,
    olderThanMs: maxAgeSeconds > 0 ? now - maxAgeSeconds * 1000 : undefined,
  };
}

/**
 * Trims every topic by its policy every retentionIntervalSeconds. Retention is the only thing
 * that deletes data, and viewers are told of what it deleted with a `gap` frame.
 */
export class RetentionLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | undefined;

  constructor(
    private readonly store: Store,
    private readonly settings: RetentionSettings,
    private readonly onError: (error: unknown) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.runOnce().catch(this.onError);
    }, this.settings.retentionIntervalSeconds * 1000);
    this.timer.unref();
  }

  /** One pass over every topic; resolves with the number of entries removed. */
  runOnce(): Promise<number> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async pass(): Promise<number> {
    let removed = 0;
    let after: string | undefined;
    do {
      const page = await this.store.listTopics({ after, limit: 1000 });
      for (const topic of page.items) {
        const policy = retentionPolicy(topic, this.settings, this.now());
        if (policy.maxEntries === 0 && policy.olderThanMs === undefined) continue;
        removed += (await this.store.trimTopic(topic, policy)).removed;
      }
      after = page.next;
    } while (after !== undefined);
    return removed;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running?.catch(() => undefined);
  }
}

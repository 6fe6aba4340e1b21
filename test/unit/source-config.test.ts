import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SettingsError } from '../../src/model/settings.js';
import { loadSources } from '../../src/sources/config.js';

// A STOMP source's broker credentials come from the config file, the environment or a file
// (docs/CONFIGURATION.md, "Sources"), and a bad secret file stops the start with its name, never
// its contents.

const dir = mkdtempSync(join(tmpdir(), 'tailwater-sources-'));

function configWith(source: object): string {
  const file = join(dir, `config-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ sources: [{ type: 'stomp', ...source }] }));
  return file;
}

function secretFile(text: string): string {
  const file = join(dir, `secret-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, text, { mode: 0o600 });
  return file;
}

describe('STOMP source credentials', () => {
  it("reads a source's passcodeFile (its first line, trimmed) instead of passcode", () => {
    const file = secretFile('s3cret-from-a-mount\nnot this line\n');
    const [source] = loadSources(configWith({ login: 'tailwater', passcodeFile: file }), {});
    expect(source).toMatchObject({ login: 'tailwater', passcode: 's3cret-from-a-mount' });
    expect(source).not.toHaveProperty('passcodeFile');
  });

  it('lets TAILWATER_STOMP_PASSCODE, then TAILWATER_STOMP_PASSCODE_FILE, override every source', () => {
    const config = configWith({ passcode: 'in-the-file', passcodeFile: secretFile('own\n') });
    const shared = secretFile('from-the-env-file\n');
    expect(loadSources(config, { TAILWATER_STOMP_PASSCODE_FILE: shared })[0]!.passcode).toBe(
      'from-the-env-file',
    );
    const both = {
      TAILWATER_STOMP_PASSCODE: 'from-the-env',
      TAILWATER_STOMP_PASSCODE_FILE: shared,
    };
    expect(loadSources(config, both)[0]!.passcode).toBe('from-the-env');
    expect(loadSources(config, {})[0]!.passcode).toBe('own');
    expect(loadSources(configWith({ passcode: 'plain' }), {})[0]!.passcode).toBe('plain');
  });

  it('refuses an unreadable or empty passcode file, naming the file and not a secret', () => {
    const missing = join(dir, 'no-such-file');
    const load = () => loadSources(configWith({ topic: 'iceberg', passcodeFile: missing }), {});
    expect(load).toThrow(SettingsError);
    expect(load).toThrow(/sources: iceberg: passcodeFile: cannot read .*no-such-file \(ENOENT\)/);
    const empty = secretFile('\n');
    expect(() =>
      loadSources(configWith({ passcode: 'p' }), { TAILWATER_STOMP_PASSCODE_FILE: empty }),
    ).toThrow(/TAILWATER_STOMP_PASSCODE_FILE: .* holds nothing on its first line/);
  });
});

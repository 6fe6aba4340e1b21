import { readFileSync } from 'node:fs';
import type { Settings } from '../model/settings.js';
import { SettingsError } from '../model/settings.js';

/**
 * The TLS certificate and key the settings name, read at start (an unreadable file is an error
 * now, not at the first connection), or undefined to serve plain HTTP (docs/SECURITY.md,
 * "Facing a network").
 */
export function tlsOptions(
  settings: Pick<Settings, 'tlsCert' | 'tlsKey'>,
): { cert: Buffer; key: Buffer } | undefined {
  const { tlsCert, tlsKey } = settings;
  if (tlsCert === '' && tlsKey === '') return undefined;
  if (tlsCert === '' || tlsKey === '') {
    throw new SettingsError(
      'tls: give both tlsCert and tlsKey (--tls-cert, --tls-key), or neither.',
    );
  }
  const read = (name: string, file: string) => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new SettingsError(
        `${name}: cannot read ${file} (${error instanceof Error ? error.message : String(error)}).`,
      );
    }
  };
  return { cert: read('tlsCert', tlsCert), key: read('tlsKey', tlsKey) };
}

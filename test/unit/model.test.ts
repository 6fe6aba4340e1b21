import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCursor } from '../../src/model/cursor.js';
import { TailwaterError } from '../../src/model/errors.js';
import { splitLogText } from '../../src/model/log-chunks.js';
import {
  validateFqn,
  validateProducerKind,
  validateRunId,
  validateTopic,
} from '../../src/model/names.js';
import {
  defaultSettings,
  envName,
  loadSettings,
  readConfigFile,
  readEnv,
  SettingsError,
} from '../../src/model/settings.js';

/** Runs `fn` and returns what it threw (failing the test if it did not throw). */
function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw, but the call returned');
}

function codeThrownBy(fn: () => unknown): string | undefined {
  const error = thrownBy(fn);
  expect(error).toBeInstanceOf(TailwaterError);
  return (error as TailwaterError).code;
}

const bytes = (text: string) => Buffer.byteLength(text, 'utf8');

// docs/API.md, "Names".
const PROTOCOL_RESERVED_KINDS = ['end', 'gap', 'error', 'cursor', 'status', 'system', 'connected'];

describe('pipeline FQNs and run ids', () => {
  const validators = [
    ['validateFqn', validateFqn],
    ['validateRunId', validateRunId],
  ] as const;

  for (const [name, validate] of validators) {
    describe(name, () => {
      it('accepts a scheduled run id with colons and a plus sign', () => {
        const value = 'scheduled__2026-08-10T00:00:00+00:00';
        expect(validate(value)).toBe(value);
      });

      it('accepts dots, spaces and non-ASCII letters', () => {
        expect(validate('warehouse.ingest.orders')).toBe('warehouse.ingest.orders');
        expect(validate('nightly run 例 😀')).toBe('nightly run 例 😀');
      });

      it('accepts a one-byte name and a name of exactly 256 bytes', () => {
        expect(validate('a')).toBe('a');
        const ascii = 'a'.repeat(256);
        expect(validate(ascii)).toBe(ascii);
        // 85 three-byte characters plus one ASCII byte: 256 bytes in 86 characters.
        const multibyte = '例'.repeat(85) + 'a';
        expect(bytes(multibyte)).toBe(256);
        expect(validate(multibyte)).toBe(multibyte);
      });

      it('refuses an empty name with TW_BAD_NAME', () => {
        expect(codeThrownBy(() => validate(''))).toBe('TW_BAD_NAME');
      });

      it('refuses 257 bytes with TW_BAD_NAME, counting UTF-8 bytes rather than characters', () => {
        expect(codeThrownBy(() => validate('a'.repeat(257)))).toBe('TW_BAD_NAME');
        const multibyte = '例'.repeat(86); // 86 characters, 258 bytes
        expect(multibyte.length).toBeLessThan(256);
        expect(codeThrownBy(() => validate(multibyte))).toBe('TW_BAD_NAME');
      });

      it('refuses C0 controls, DEL and C1 controls with TW_BAD_NAME', () => {
        for (const control of [
          '\u0000',
          '\t',
          '\n',
          '\r',
          '\u001b',
          '\u007f',
          '\u0085',
          '\u009f',
        ]) {
          expect(codeThrownBy(() => validate(`run${control}1`))).toBe('TW_BAD_NAME');
        }
      });

      it('refuses a lone surrogate, which is not valid UTF-8, with TW_BAD_UTF8', () => {
        expect(codeThrownBy(() => validate('run\ud800'))).toBe('TW_BAD_UTF8');
      });

      it('gives the NFC spelling, so that composed and decomposed accents name the same thing', () => {
        const composed = 'caf\u00e9';
        const decomposed = 'cafe\u0301';
        expect(validate(decomposed)).toBe(composed);
        expect(validate(composed)).toBe(composed);
      });

      it('counts the 256-byte limit on the NFC spelling', () => {
        // 128 × "e + combining acute" is 384 bytes decomposed, 256 composed.
        expect(validate('e\u0301'.repeat(128))).toBe('\u00e9'.repeat(128));
      });

      it('refuses bidirectional embeddings, overrides and isolates with TW_BAD_NAME', () => {
        for (const bidi of [
          '\u202a',
          '\u202b',
          '\u202c',
          '\u202d',
          '\u202e',
          '\u2066',
          '\u2067',
          '\u2068',
          '\u2069',
        ]) {
          expect(codeThrownBy(() => validate(`admin${bidi}txt.exe`))).toBe('TW_BAD_NAME');
        }
      });
    });
  }
});

describe('validateTopic', () => {
  it('accepts letters, digits, underscore, dot and dash', () => {
    for (const topic of ['iceberg', '_runs', 'a.b-c_D9', 'x']) {
      expect(validateTopic(topic)).toBe(topic);
    }
  });

  it('accepts 128 characters and refuses 129 with TW_BAD_NAME', () => {
    expect(validateTopic('t'.repeat(128))).toBe('t'.repeat(128));
    expect(codeThrownBy(() => validateTopic('t'.repeat(129)))).toBe('TW_BAD_NAME');
  });

  it('refuses an empty topic and any character outside [A-Za-z0-9_.-] with TW_BAD_NAME', () => {
    for (const topic of ['', 'a b', 'a/b', 'a:b', 'é', 'a\nb', 'a%2Fb']) {
      expect(codeThrownBy(() => validateTopic(topic))).toBe('TW_BAD_NAME');
    }
  });
});

describe('validateProducerKind', () => {
  it('accepts letters, digits, underscore, dot, colon and dash', () => {
    for (const kind of ['progress', 'table.commit', 'step:started', 'a-b_C9', 'k']) {
      expect(validateProducerKind(kind)).toBe(kind);
    }
  });

  it('accepts 64 characters and refuses 65 with TW_BAD_NAME', () => {
    expect(validateProducerKind('k'.repeat(64))).toBe('k'.repeat(64));
    expect(codeThrownBy(() => validateProducerKind('k'.repeat(65)))).toBe('TW_BAD_NAME');
  });

  it('refuses an empty kind and any character outside [A-Za-z0-9_.:-] with TW_BAD_NAME', () => {
    for (const kind of ['', 'a b', 'a/b', 'é', 'a\nb']) {
      expect(codeThrownBy(() => validateProducerKind(kind))).toBe('TW_BAD_NAME');
    }
  });

  it.each(PROTOCOL_RESERVED_KINDS)('refuses the reserved kind %s with TW_RESERVED_KIND', (kind) => {
    const error = thrownBy(() => validateProducerKind(kind));
    expect(error).toBeInstanceOf(TailwaterError);
    expect((error as TailwaterError).code).toBe('TW_RESERVED_KIND');
    expect((error as TailwaterError).status).toBe(400);
  });
});

describe('parseCursor', () => {
  it('parses non-negative integers', () => {
    expect(parseCursor('0')).toBe(0);
    expect(parseCursor('1')).toBe(1);
    expect(parseCursor('42')).toBe(42);
    expect(parseCursor('123456789012345')).toBe(123456789012345);
  });

  it.each(['-1', '1.5', 'abc', '', '1e3', '0x10', '+1', '12abc', ' '])(
    'refuses %j with TW_BAD_CURSOR',
    (value) => {
      const error = thrownBy(() => parseCursor(value));
      expect(error).toBeInstanceOf(TailwaterError);
      expect((error as TailwaterError).code).toBe('TW_BAD_CURSOR');
      expect((error as TailwaterError).status).toBe(400);
    },
  );

  it('names the refused parameter and its value in the message', () => {
    const error = thrownBy(() => parseCursor('-1', 'after'));
    expect((error as Error).message).toContain('after');
    expect((error as Error).message).toContain('"-1"');
  });
});

describe('splitLogText', () => {
  it('keeps a character whole even when the limit is smaller than the character', () => {
    expect(splitLogText('ab😀cd', 3)).toEqual(['ab', '😀', 'cd']);
  });

  function expectWellCut(text: string, maxBytes: number, pieces: string[]): void {
    expect(pieces.join('')).toBe(text);
    for (const piece of pieces) {
      expect(bytes(piece)).toBeGreaterThan(0);
      expect(bytes(piece)).toBeLessThanOrEqual(maxBytes);
      // A character split between pieces would decode to U+FFFD or a lone surrogate.
      expect(piece).not.toContain('\ufffd');
      expect(piece.isWellFormed()).toBe(true);
    }
  }

  it('returns text that fits in maxBytes as a single piece', () => {
    expect(splitLogText('line 1\nline 2\n', 14)).toEqual(['line 1\nline 2\n']);
    expect(splitLogText('例', 3)).toEqual(['例']);
  });

  it('cuts each piece after the last newline that fits', () => {
    const text = 'aaa\nbbb\nccc\nddd';
    expect(splitLogText(text, 9)).toEqual(['aaa\nbbb\n', 'ccc\nddd']);
    expect(splitLogText(text, 6)).toEqual(['aaa\n', 'bbb\n', 'ccc\n', 'ddd']);
  });

  it('cuts a line longer than maxBytes at maxBytes, then resumes cutting at newlines', () => {
    const text = 'short\n' + 'x'.repeat(20) + '\nend\n';
    const pieces = splitLogText(text, 8);
    expect(pieces).toEqual(['short\n', 'xxxxxxxx', 'xxxxxxxx', 'xxxx\n', 'end\n']);
    expectWellCut(text, 8, pieces);
  });

  it('never splits a three-byte character such as 例', () => {
    const text = '例'.repeat(5); // 15 bytes
    const pieces = splitLogText(text, 4);
    expect(pieces).toEqual(['例', '例', '例', '例', '例']);
    expectWellCut(text, 4, pieces);
    expect(splitLogText(text, 8)).toEqual(['例例', '例例', '例']);
  });

  it('never splits a four-byte emoji', () => {
    const text = 'a😀😀b'; // 1 + 4 + 4 + 1 bytes
    const pieces = splitLogText(text, 6);
    expect(pieces).toEqual(['a😀', '😀b']);
    expectWellCut(text, 6, pieces);
    expectWellCut('😀'.repeat(7), 5, splitLogText('😀'.repeat(7), 5));
  });

  it('cuts a multi-byte line longer than maxBytes on character boundaries', () => {
    const text = 'ok\n' + '例😀'.repeat(10) + '\ndone';
    const pieces = splitLogText(text, 16);
    expect(pieces[0]).toBe('ok\n');
    expectWellCut(text, 16, pieces);
  });

  it('gives pieces whose concatenation equals the input for random mixed text', () => {
    // A small deterministic generator, so a failure is reproducible.
    let state = 12345;
    const random = () => {
      state = (state * 1103515245 + 12345) % 2147483648;
      return state / 2147483648;
    };
    const alphabet = ['a', 'b', ' ', '\n', 'é', '例', '😀'];
    for (let round = 0; round < 200; round += 1) {
      const length = Math.floor(random() * 80);
      let text = '';
      for (let i = 0; i < length; i += 1) text += alphabet[Math.floor(random() * alphabet.length)];
      const maxBytes = 4 + Math.floor(random() * 30);
      expectWellCut(text || 'x', maxBytes, splitLogText(text || 'x', maxBytes));
    }
  });
});

describe('settings', () => {
  const KiB = 1024;
  const MiB = 1024 * KiB;
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-settings-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  let files = 0;
  function configFile(content: unknown): string {
    files += 1;
    const path = join(dir, `config-${files}.json`);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  }

  it("has defaults that match docs/CONFIGURATION.md's tables", () => {
    expect(defaultSettings()).toMatchObject({
      heartbeatSeconds: 25,
      pollSeconds: 2,
      readBatchEntries: 1000,
      maxBytesPerTick: 1 * MiB,
      maxStreamBytes: 32 * MiB,
      maxStreamSeconds: 3600,
      maxIdleSeconds: 300,
      finishGraceSeconds: 10,
      unknownRunGraceSeconds: 60,
      replayBufferBytes: 256 * KiB,
      maxPendingBytesPerViewer: 4 * MiB,
      maxActiveStreams: 200,
      maxActiveConnections: 500,
      maxSubscribersPerStream: 100,
      tailerIdleGraceSeconds: 30,
      maxEventBytes: 64 * KiB,
      maxBatchEntries: 1000,
      runnerChunkBytes: 4096,
      runnerFlushSeconds: 3,
      runnerTimeoutSeconds: 3600,
      runnerReadTimeoutSeconds: 300,
      publisherQueue: 4096,
      publisherBatch: 64,
    });
  });

  it('has the server defaults docs/CLI.md names', () => {
    expect(defaultSettings()).toMatchObject({
      host: '127.0.0.1',
      port: 8585,
      data: './tailwater-data',
      bus: 'memory',
      insecure: false,
      demo: false,
    });
  });

  it('loads the defaults when no config file, environment variable or flag is given', () => {
    expect(loadSettings({ env: {} })).toEqual(defaultSettings());
  });

  it('names the environment variable TAILWATER_ plus the setting in upper snake case', () => {
    expect(envName('finishGraceSeconds')).toBe('TAILWATER_FINISH_GRACE_SECONDS');
    expect(envName('maxBytesPerTick')).toBe('TAILWATER_MAX_BYTES_PER_TICK');
    expect(envName('port')).toBe('TAILWATER_PORT');
  });

  it('layers defaults, then the config file, then TAILWATER_* variables, then flags', () => {
    const file = configFile({ heartbeatSeconds: 5, pollSeconds: 6, maxIdleSeconds: 7 });
    const settings = loadSettings({
      configFile: file,
      env: { TAILWATER_POLL_SECONDS: '8', TAILWATER_MAX_IDLE_SECONDS: '9' },
      flags: { maxIdleSeconds: 10 },
    });
    expect(settings.maxStreamSeconds).toBe(3600); // default
    expect(settings.heartbeatSeconds).toBe(5); // config file over default
    expect(settings.pollSeconds).toBe(8); // env over config file
    expect(settings.maxIdleSeconds).toBe(10); // flag over env
  });

  it('lets a flag left undefined fall through to the lower layers', () => {
    const settings = loadSettings({
      env: { TAILWATER_PORT: '9000' },
      flags: { port: undefined, host: undefined },
    });
    expect(settings.port).toBe(9000);
    expect(settings.host).toBe('127.0.0.1');
  });

  it('reads the config file named by TAILWATER_CONFIG when no file is passed', () => {
    const file = configFile({ heartbeatSeconds: 4 });
    expect(loadSettings({ env: { TAILWATER_CONFIG: file } }).heartbeatSeconds).toBe(4);
  });

  it('accepts fractional seconds from the environment', () => {
    const settings = readEnv({
      TAILWATER_FINISH_GRACE_SECONDS: '0.2',
      TAILWATER_UNKNOWN_RUN_GRACE_SECONDS: '0.5',
    });
    expect(settings).toEqual({ finishGraceSeconds: 0.2, unknownRunGraceSeconds: 0.5 });
  });

  it('parses booleans and strings from the environment', () => {
    expect(readEnv({ TAILWATER_INSECURE: 'true', TAILWATER_DEMO: '0' })).toEqual({
      insecure: true,
      demo: false,
    });
    expect(readEnv({ TAILWATER_HOST: '0.0.0.0', TAILWATER_LOG_LEVEL: 'debug' })).toEqual({
      host: '0.0.0.0',
      logLevel: 'debug',
    });
  });

  it('ignores environment variables that name no setting', () => {
    expect(readEnv({ TAILWATER_SERVER: 'http://x', PATH: '/bin' })).toEqual({});
  });

  it('refuses a non-numeric environment value with a SettingsError naming the variable', () => {
    const error = thrownBy(() => readEnv({ TAILWATER_HEARTBEAT_SECONDS: 'soon' }));
    expect(error).toBeInstanceOf(SettingsError);
    expect((error as Error).message).toContain('TAILWATER_HEARTBEAT_SECONDS');
  });

  it('refuses an out-of-range environment value with a SettingsError naming the variable', () => {
    const error = thrownBy(() => loadSettings({ env: { TAILWATER_MAX_ACTIVE_STREAMS: '-1' } }));
    expect(error).toBeInstanceOf(SettingsError);
    expect((error as Error).message).toContain('TAILWATER_MAX_ACTIVE_STREAMS');
  });

  it('refuses a bad boolean in the environment with a SettingsError naming the variable', () => {
    const error = thrownBy(() => readEnv({ TAILWATER_INSECURE: 'yes' }));
    expect(error).toBeInstanceOf(SettingsError);
    expect((error as Error).message).toContain('TAILWATER_INSECURE');
  });

  it('refuses an unknown config key with a SettingsError naming the file and the key', () => {
    const file = configFile({ heartbeatSeconds: 5, heartbeatSecs: 5 });
    const error = thrownBy(() => readConfigFile(file));
    expect(error).toBeInstanceOf(SettingsError);
    expect((error as Error).message).toContain(file);
    expect((error as Error).message).toContain('heartbeatSecs');
  });

  it('refuses a config value of the wrong type with a SettingsError naming the file and the key', () => {
    const file = configFile({ maxIdleSeconds: 'five minutes' });
    const error = thrownBy(() => loadSettings({ configFile: file, env: {} }));
    expect(error).toBeInstanceOf(SettingsError);
    expect((error as Error).message).toContain(file);
    expect((error as Error).message).toContain('maxIdleSeconds');
  });

  it('refuses a config file that is not JSON with a SettingsError naming the file', () => {
    const file = configFile('{ heartbeatSeconds: 5 ');
    const error = thrownBy(() => readConfigFile(file));
    expect(error).toBeInstanceOf(SettingsError);
    expect((error as Error).message).toContain(file);
  });
});

import type { Command } from 'commander';
import type { PartialSettings } from '../model/settings.js';
import { loadSettings } from '../model/settings.js';
import { startDemo } from './demo.js';
import { loadSources } from '../sources/config.js';
import { startServer } from './server.js';

interface ServeFlags {
  host?: string;
  port?: string;
  data?: string;
  store?: string;
  bus?: string;
  tlsCert?: string;
  tlsKey?: string;
  config?: string;
  demo?: boolean;
  insecure?: boolean;
  logLevel?: string;
}

function toSettings(flags: ServeFlags): PartialSettings {
  return {
    host: flags.host,
    port: flags.port === undefined ? undefined : Number(flags.port),
    data: flags.data,
    store: flags.store,
    bus: flags.bus,
    tlsCert: flags.tlsCert,
    tlsKey: flags.tlsKey,
    demo: flags.demo,
    insecure: flags.insecure,
    logLevel: flags.logLevel as PartialSettings['logLevel'],
  };
}

export function serveCommand(program: Command): void {
  program
    .command('serve')
    .description('Run the Tailwater server.')
    .option('--host <host>', 'address to listen on (default 127.0.0.1)')
    .option('--port <port>', 'port to listen on; 0 picks a free one (default 8585)')
    .option('--data <dir>', 'data directory for the embedded store (default ./tailwater-data)')
    .option(
      '--store <url>',
      'store: sqlite:<path> (default sqlite:<data>/tailwater.db) or postgres://user@host:port/db',
    )
    .option(
      '--bus <url>',
      'bus: memory (default, one process), redis://host:port, or postgres (LISTEN/NOTIFY on the store)',
    )
    .option('--tls-cert <file>', 'serve HTTPS with this PEM certificate (chain); needs --tls-key')
    .option('--tls-key <file>', 'the PEM private key of --tls-cert')
    .option('--config <file>', 'JSON config file of settings (see docs/CONFIGURATION.md)')
    .option('--demo', 'also run a sample pipeline that writes live logs and events')
    .option('--insecure', 'allow a non-loopback --host without authentication')
    .option('--log-level <level>', 'server log level: fatal … trace, or silent (default info)')
    .action(async (flags: ServeFlags) => {
      const settings = loadSettings({ configFile: flags.config, flags: toSettings(flags) });
      const server = await startServer(settings, { sources: loadSources(flags.config) });
      const demo = settings.demo
        ? startDemo(server.ingest, (message) => server.app.log.info(message), {
            iceberg: { topic: settings.icebergTopic, kind: settings.icebergKind },
            runSeconds: settings.demoRunSeconds,
          })
        : undefined;
      process.stdout.write(`Tailwater listening on ${server.url}\n`);
      if (demo) {
        process.stdout.write(
          `Demo pipeline running: curl -N ${server.url}/api/v1/pipelines/demo.nightly_etl/runs/latest/stream\n`,
        );
      }
      const shutdown = async (signal: string) => {
        process.stdout.write(`${signal}: ending streams and shutting down\n`);
        demo?.stop();
        await server.close();
        process.exit(0);
      };
      process.once('SIGTERM', () => void shutdown('SIGTERM'));
      process.once('SIGINT', () => void shutdown('SIGINT'));
    });
}

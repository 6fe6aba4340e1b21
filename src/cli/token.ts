import type { Command } from 'commander';
import { SignJWT } from 'jose';
import { loadSettings, SettingsError } from '../model/settings.js';
import { parseGrants } from '../model/scopes.js';
import { tokenVerifier } from '../http/token-verifier.js';
import { UsageError } from './client-options.js';

interface TokenFlags {
  read: string[];
  write: string[];
  admin?: boolean;
  ttl?: string;
  subject?: string;
  config?: string;
}

const collect = (value: string, previous: string[]) => [...previous, value];

/**
 * `tailwater token`: mints a token from the configured HS256 secret (docs/CLI.md), for a
 * producer, a viewer or the dashboard. The secret comes from the settings (TAILWATER_AUTH_SECRET
 * or the config file), never from the command line, where it would sit in the shell's history.
 */
export function tokenCommand(program: Command): void {
  program
    .command('token')
    .description('Mint a token from the configured authSecret (HS256) and print it.')
    .option(
      '--read <pattern>',
      "may read what it matches, e.g. 'pipeline:etl.*' (repeatable)",
      collect,
      [],
    )
    .option(
      '--write <pattern>',
      "may append to what it matches, e.g. 'topic:iceberg' (repeatable)",
      collect,
      [],
    )
    .option('--admin', 'may do everything, deletes included')
    .option('--ttl <seconds>', 'valid for this long (default 3600)')
    .option('--subject <name>', 'who the token is for (its sub claim, shown in logs)')
    .option('--config <file>', 'JSON config file of settings (see docs/CONFIGURATION.md)')
    .action(async (flags: TokenFlags) => {
      const settings = loadSettings({ configFile: flags.config, flags: {} });
      if (settings.authSecret === '') {
        throw new SettingsError(
          'authSecret: not set, so there is nothing to sign with: set TAILWATER_AUTH_SECRET (or authSecret in the config file). Tokens for a public key are made where its private key is.',
        );
      }
      // As the server would judge the secret at start (its length).
      tokenVerifier(settings);
      const ttl = flags.ttl === undefined ? 3600 : Number(flags.ttl);
      if (!Number.isInteger(ttl) || ttl <= 0) {
        throw new UsageError(`--ttl: "${flags.ttl}" is not a whole number of seconds.`);
      }
      const claim = {
        read: flags.read,
        write: flags.write,
        ...(flags.admin ? { admin: true } : {}),
      };
      // The server would refuse what it cannot read: check it the same way before signing.
      parseGrants(claim);
      if (claim.read.length === 0 && claim.write.length === 0 && !flags.admin) {
        throw new UsageError(
          'Give at least one of --read, --write or --admin: this token would allow nothing.',
        );
      }
      let jwt = new SignJWT({ tailwater: claim })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuedAt()
        .setExpirationTime(`${ttl}s`);
      if (flags.subject) jwt = jwt.setSubject(flags.subject);
      if (settings.authIssuer) jwt = jwt.setIssuer(settings.authIssuer);
      if (settings.authAudience) jwt = jwt.setAudience(settings.authAudience);
      const secret = new TextEncoder().encode(settings.authSecret);
      process.stdout.write(`${await jwt.sign(secret)}\n`);
    });
}

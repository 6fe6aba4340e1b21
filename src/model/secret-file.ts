import { readFileSync } from 'node:fs';

/** A secret file that cannot be used: unreadable, or holding nothing. Its message names the file. */
export class SecretFileError extends Error {
  override name = 'SecretFileError';
}

/**
 * The secret in a file (a token, a passcode), as a secrets mount or `printf` leaves it: its first
 * line, trimmed. An unreadable or empty file is an error, never an empty secret sent as one.
 */
export function readSecretFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new SecretFileError(
      `cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'}).`,
    );
  }
  const secret = text.split(/\r?\n/)[0]!.trim();
  if (secret === '') throw new SecretFileError(`${path} holds nothing on its first line.`);
  return secret;
}

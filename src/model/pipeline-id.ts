import { createHash } from 'node:crypto';

/**
 * A pipeline's id: a UUID (version 5 layout) derived from its FQN, so it is the same on every
 * server and for ever. OpenMetadata's clients name a pipeline by such an id or by its FQN.
 * In a file of its own: it needs node:crypto, which the browser SDK must not load.
 */
export function pipelineId(fqn: string): string {
  const hex = createHash('sha1').update(`tailwater:pipeline:${fqn}`).digest('hex');
  const variant = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

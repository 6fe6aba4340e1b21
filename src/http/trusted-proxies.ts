import proxyAddr from '@fastify/proxy-addr';
import { SettingsError } from '../model/settings.js';

/**
 * The `trustProxy` setting: addresses and CIDR ranges (or proxy-addr's names `loopback`,
 * `linklocal`, `uniquelocal`) of proxies whose `X-Forwarded-For` names the client
 * (docs/DEPLOYMENT.md). Empty: none; every client is its socket's address.
 */
export function trustedProxies(setting: string): string[] {
  const list = setting
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  try {
    proxyAddr.compile(list);
  } catch (error) {
    throw new SettingsError(
      `trustProxy: "${setting}" is not a list of addresses, CIDR ranges, loopback, linklocal or uniquelocal (${error instanceof Error ? error.message : String(error)}).`,
    );
  }
  return list;
}

/** Whether a socket's address is one of the trusted proxies. */
export function isTrustedProxy(list: readonly string[]): (address: string) => boolean {
  if (list.length === 0) return () => false;
  const trust = proxyAddr.compile([...list]);
  return (address) => trust(address, 0);
}

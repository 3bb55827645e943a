/**
 * Where Redis is, as every component's `redisUrl` says it:
 *
 * - `redis://[user[:password]@]host:port[/db]` (or `rediss://` for TLS): one Redis;
 * - `redis+sentinel://[user[:password]@]host:port[,host:port...]/<primary name>` (or
 *   `rediss+sentinel://`, TLS to the sentinels and to Redis): a primary found through Sentinel,
 *   followed when Sentinel promotes a replica. The user and password are Redis's; sentinels that
 *   need their own go in `?sentinelUsername=...&sentinelPassword=...`. A sentinel without a port
 *   is on 26379.
 */
export type RedisLocation =
  | { kind: 'single'; url: string }
  | {
      kind: 'sentinel';
      sentinels: { host: string; port: number }[];
      primaryName: string;
      tls: boolean;
      username?: string;
      password?: string;
      sentinelUsername?: string;
      sentinelPassword?: string;
    };

const sentinelSchemes = /^(rediss?)\+sentinel:\/\//;
/** Sentinels listed in one URL: a handful in practice (3 or 5). */
const maxSentinels = 16;

/** The location a URL names; throws an Error saying what is wrong (the caller names the setting). */
export function parseRedisUrl(url: string): RedisLocation {
  if (/^rediss?:\/\//.test(url)) return { kind: 'single', url };
  const scheme = sentinelSchemes.exec(url);
  if (!scheme) throw new Error('expected a URL such as redis://127.0.0.1:6379, or redis+sentinel://host:26379,host:26380/<primary name> for Sentinel');
  const rest = url.slice(scheme[0].length);
  const at = rest.lastIndexOf('@', rest.indexOf('/') === -1 ? rest.length : rest.indexOf('/'));
  const credentials = at === -1 ? '' : rest.slice(0, at);
  const [hostsAndPath, query = ''] = rest.slice(at + 1).split('?', 2) as [string, string?];
  const slash = hostsAndPath.indexOf('/');
  const hosts = slash === -1 ? hostsAndPath : hostsAndPath.slice(0, slash);
  const primaryName = slash === -1 ? '' : decodeURIComponent(hostsAndPath.slice(slash + 1));
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(primaryName)) throw new Error('expected the primary\'s name after the sentinels, e.g. redis+sentinel://host:26379/mymaster (1-64 characters of A-Z, a-z, 0-9, ".", "_", "-")');
  const sentinels = hosts.split(',').map((entry) => {
    const match = /^(\[[0-9a-fA-F:]+\]|[^\s:[\]/]+)(?::(\d{1,5}))?$/.exec(entry);
    const port = match?.[2] === undefined ? 26379 : Number(match[2]);
    if (!match || port < 1 || port > 65535) throw new Error(`sentinel ${JSON.stringify(entry)}: expected host or host:port (port 1-65535)`);
    return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
  });
  if (sentinels.length > maxSentinels) throw new Error(`${sentinels.length} sentinels; expected at most ${maxSentinels}`);
  const location: RedisLocation = { kind: 'sentinel', sentinels, primaryName, tls: scheme[1] === 'rediss' };
  if (credentials) {
    const colon = credentials.indexOf(':');
    const username = decodeURIComponent(colon === -1 ? credentials : credentials.slice(0, colon));
    if (username) location.username = username;
    if (colon !== -1) location.password = decodeURIComponent(credentials.slice(colon + 1));
  }
  for (const [name, value] of new URLSearchParams(query)) {
    if (name === 'sentinelUsername') location.sentinelUsername = value;
    else if (name === 'sentinelPassword') location.sentinelPassword = value;
    else throw new Error(`unknown parameter ${JSON.stringify(name)}; expected sentinelUsername or sentinelPassword`);
  }
  return location;
}

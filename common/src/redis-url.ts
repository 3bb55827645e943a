/**
 * Where Redis is, as every component's `redisUrl` says it:
 *
 * - `redis://[user[:password]@]host:port[/db]` (or `rediss://` for TLS): one Redis;
 * - `redis+sentinel://[user[:password]@]host:port[,host:port...]/<primary name>` (or
 *   `rediss+sentinel://`, TLS to the sentinels and to Redis): a primary found through Sentinel,
 *   followed when Sentinel promotes a replica. The user and password are Redis's; sentinels that
 *   need their own go in `?sentinelUsername=...&sentinelPassword=...`. A sentinel without a port
 *   is on 26379;
 * - `redis+cluster://[user[:password]@]host:port[,host:port...]` (or `rediss+cluster://`): a Redis
 *   Cluster, found from any of the nodes listed. Each Headroom cluster's ledger is under one hash
 *   tag, so it lives on one shard.
 */
export type RedisLocation =
  | { kind: 'single'; url: string }
  | {
      kind: 'cluster';
      nodes: { host: string; port: number }[];
      tls: boolean;
      username?: string;
      password?: string;
    }
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
const clusterSchemes = /^(rediss?)\+cluster:\/\//;
/** Sentinels, or cluster nodes, listed in one URL: a handful in practice. */
const maxHosts = 16;

/** `host[:port]` entries separated by commas. */
function parseHosts(list: string, what: string, defaultPort: number | undefined): { host: string; port: number }[] {
  const hosts = list.split(',').map((entry) => {
    const match = /^(\[[0-9a-fA-F:]+\]|[^\s:[\]/]+)(?::(\d{1,5}))?$/.exec(entry);
    const port = match?.[2] === undefined ? (defaultPort ?? 0) : Number(match[2]);
    if (!match || port < 1 || port > 65535)
      throw new Error(`${what} ${JSON.stringify(entry)}: expected ${defaultPort === undefined ? 'host:port' : 'host or host:port'} (port 1-65535)`);
    return { host: match[1]!.replace(/^\[|\]$/g, ''), port };
  });
  if (hosts.length > maxHosts) throw new Error(`${hosts.length} ${what}s; expected at most ${maxHosts}`);
  return hosts;
}

/** `user:password@` before the hosts, decoded. */
function parseCredentials(credentials: string): { username?: string; password?: string } {
  if (!credentials) return {};
  const colon = credentials.indexOf(':');
  const username = decodeURIComponent(colon === -1 ? credentials : credentials.slice(0, colon));
  return { ...(username ? { username } : {}), ...(colon === -1 ? {} : { password: decodeURIComponent(credentials.slice(colon + 1)) }) };
}

/** The location a URL names; throws an Error saying what is wrong (the caller names the setting). */
export function parseRedisUrl(url: string): RedisLocation {
  if (/^rediss?:\/\//.test(url)) return { kind: 'single', url };
  const cluster = clusterSchemes.exec(url);
  if (cluster) {
    const rest = url.slice(cluster[0].length);
    const at = rest.lastIndexOf('@');
    const hosts = rest.slice(at + 1).replace(/\/$/, '');
    if (hosts.includes('/') || hosts.includes('?'))
      throw new Error('expected redis+cluster://host:port,host:port (no database or parameters: a Redis Cluster has one database)');
    return {
      kind: 'cluster',
      nodes: parseHosts(hosts, 'cluster node', undefined),
      tls: cluster[1] === 'rediss',
      ...parseCredentials(at === -1 ? '' : rest.slice(0, at)),
    };
  }
  const scheme = sentinelSchemes.exec(url);
  if (!scheme)
    throw new Error(
      'expected a URL such as redis://127.0.0.1:6379, or redis+sentinel://host:26379,host:26380/<primary name> for Sentinel, or redis+cluster://host:7000,host:7001 for a Redis Cluster',
    );
  const rest = url.slice(scheme[0].length);
  const at = rest.lastIndexOf('@', rest.indexOf('/') === -1 ? rest.length : rest.indexOf('/'));
  const credentials = at === -1 ? '' : rest.slice(0, at);
  const [hostsAndPath, query = ''] = rest.slice(at + 1).split('?', 2) as [string, string?];
  const slash = hostsAndPath.indexOf('/');
  const hosts = slash === -1 ? hostsAndPath : hostsAndPath.slice(0, slash);
  const primaryName = slash === -1 ? '' : decodeURIComponent(hostsAndPath.slice(slash + 1));
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(primaryName))
    throw new Error(
      'expected the primary\'s name after the sentinels, e.g. redis+sentinel://host:26379/mymaster (1-64 characters of A-Z, a-z, 0-9, ".", "_", "-")',
    );
  const sentinels = parseHosts(hosts, 'sentinel', 26379);
  const location: RedisLocation = { kind: 'sentinel', sentinels, primaryName, tls: scheme[1] === 'rediss', ...parseCredentials(credentials) };
  for (const [name, value] of new URLSearchParams(query)) {
    if (name === 'sentinelUsername') location.sentinelUsername = value;
    else if (name === 'sentinelPassword') location.sentinelPassword = value;
    else throw new Error(`unknown parameter ${JSON.stringify(name)}; expected sentinelUsername or sentinelPassword`);
  }
  return location;
}

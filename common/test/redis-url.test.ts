import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { parseRedisUrl, withoutPassword } from '../src/index';

test('a Redis URL names one Redis, or a primary found through Sentinel', () => {
  assert.deepEqual(parseRedisUrl('redis://127.0.0.1:6379'), { kind: 'single', url: 'redis://127.0.0.1:6379' });
  assert.deepEqual(parseRedisUrl('rediss://user:pw@redis.internal:6380/2'), { kind: 'single', url: 'rediss://user:pw@redis.internal:6380/2' });
  assert.deepEqual(parseRedisUrl('redis+sentinel://10.0.0.1:26379,10.0.0.2,[::1]:26380/hr-primary'), {
    kind: 'sentinel',
    sentinels: [
      { host: '10.0.0.1', port: 26379 },
      { host: '10.0.0.2', port: 26379 },
      { host: '::1', port: 26380 },
    ],
    primaryName: 'hr-primary',
    tls: false,
  });
  assert.deepEqual(parseRedisUrl('rediss+sentinel://headroom:p%40ss@s1:26379/mymaster?sentinelPassword=sp'), {
    kind: 'sentinel',
    sentinels: [{ host: 's1', port: 26379 }],
    primaryName: 'mymaster',
    tls: true,
    username: 'headroom',
    password: 'p@ss',
    sentinelPassword: 'sp',
  });
});

test('a Redis Cluster URL lists its nodes', () => {
  assert.deepEqual(parseRedisUrl('redis+cluster://10.0.0.1:7000,10.0.0.2:7001/'), {
    kind: 'cluster',
    nodes: [
      { host: '10.0.0.1', port: 7000 },
      { host: '10.0.0.2', port: 7001 },
    ],
    tls: false,
  });
  assert.deepEqual(parseRedisUrl('rediss+cluster://headroom:pw@node-a:6379'), {
    kind: 'cluster',
    nodes: [{ host: 'node-a', port: 6379 }],
    tls: true,
    username: 'headroom',
    password: 'pw',
  });
  assert.throws(() => parseRedisUrl('redis+cluster://node-a'), /cluster node "node-a": expected host:port/);
  assert.throws(() => parseRedisUrl('redis+cluster://node-a:7000/2'), /no database or parameters: a Redis Cluster has one database/);
});

test('a bad Redis URL is refused with what is accepted, and its passwords are not echoed', () => {
  const cases: [string, RegExp][] = [
    [
      'http://127.0.0.1:6379',
      /expected a URL such as redis:\/\/127\.0\.0\.1:6379, or redis\+sentinel:\/\/.* or redis\+cluster:\/\/host:7000,host:7001 for a Redis Cluster/,
    ],
    ['redis+sentinel://127.0.0.1:26379', /expected the primary's name after the sentinels/],
    ['redis+sentinel://127.0.0.1:26379/', /expected the primary's name/],
    ['redis+sentinel://127.0.0.1:0/m', /sentinel "127\.0\.0\.1:0": expected host or host:port \(port 1-65535\)/],
    ['redis+sentinel://a:1,,b:2/m', /sentinel "": expected host or host:port/],
    ['redis+sentinel://a:1/m?db=2', /unknown parameter "db"; expected sentinelUsername or sentinelPassword/],
    [`redis+sentinel://${Array.from({ length: 17 }, (_, i) => `h${i}`).join(',')}/m`, /17 sentinels; expected at most 16/],
  ];
  for (const [url, message] of cases) assert.throws(() => parseRedisUrl(url), message, url);
  assert.equal(withoutPassword('redis+sentinel://u:secret@h:1/m?sentinelPassword=also'), 'redis+sentinel://u:***@h:1/m?sentinelPassword=***');
});

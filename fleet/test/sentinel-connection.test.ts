/**
 * A connection to the primary Sentinel names (connectRedis with a redis+sentinel:// URL) against
 * real redis-servers and sentinels: it follows a failover even when the failover is announced
 * while it is reconnecting.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { eventually, startSentinelRedis } from '@headroom/testkit';
import { connectRedis } from '../src/index';

test('a Sentinel connection that hears of the failover while it reconnects reaches the promoted primary', { timeout: 60_000 }, async (t) => {
  const sentinel = await startSentinelRedis();
  t.after(() => sentinel.stop());
  const redis = connectRedis(sentinel.url);
  t.after(() => redis.disconnect());
  await new Promise((resolve) => redis.once('ready', resolve));
  let ended = 0;
  redis.on('end', () => ended++);
  // Told of the promotion by a sentinel the connection does not ask for the primary.
  const announcements = new Redis({ port: sentinel.sentinelPorts[1] });
  t.after(() => announcements.disconnect());
  await announcements.subscribe('+switch-master');
  const promoted = new Promise((resolve) => announcements.once('message', resolve));

  // The sentinel the connection asks first stops answering, so that its reconnect is held in
  // the middle of asking when the other two promote the replica and announce it.
  const askedSentinelPid = sentinel.sentinelPids[0]!;
  process.kill(askedSentinelPid, 'SIGSTOP'); // sentinel.stop() kills it stopped or not
  await sentinel.nodes[0].stop(true);
  await promoted;
  // The connection's own subscription to that sentinel got the same message; let it be read.
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  process.kill(askedSentinelPid, 'SIGCONT');

  const pong = await eventually('the connection to answer again', 15_000, () => redis.ping().catch(() => undefined));
  assert.equal(pong, 'PONG');
  assert.equal((await redis.info('server')).match(/tcp_port:(\d+)/)?.[1], String(sentinel.nodes[1].port), 'it talks to the promoted replica');
  // ioredis gave this connection up once ("Connection is closed."): what is proved is that it came back.
  assert.ok(ended >= 1, 'the reconnect was cut short by the announcement, as the case needs');
});

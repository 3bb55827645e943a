/**
 * A connection to the primary Sentinel names (connectRedis with a redis+sentinel:// URL) against
 * real redis-servers and sentinels: it follows a failover even when the failover is announced
 * while it is reconnecting.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { Redis, type RedisOptions } from 'ioredis';
import { eventually, startSentinelRedis, type SentinelRedis } from '@headroom/testkit';
import { connectRedis, type RedisConnection } from '../src/index';

/**
 * Connects to the sentinels' primary, then fails it over so that the connection hears of the
 * promotion while it reconnects: the sentinel it asks first stops answering, so that its
 * reconnect is held in the middle of asking when the other two promote the replica and announce
 * it. Answers the connection and how many times it ended.
 */
async function failOverWhileReconnecting(
  t: TestContext,
  options: RedisOptions,
  prepare: (redis: RedisConnection) => Promise<unknown>,
): Promise<{ sentinel: SentinelRedis; redis: RedisConnection; ended: () => number }> {
  const sentinel = await startSentinelRedis();
  t.after(() => sentinel.stop());
  const redis = connectRedis(sentinel.url, options);
  t.after(() => redis.disconnect());
  await new Promise((resolve) => redis.once('ready', resolve));
  await prepare(redis);
  let ended = 0;
  redis.on('end', () => ended++);
  // Told of the promotion by a sentinel the connection does not ask for the primary.
  const announcements = new Redis({ port: sentinel.sentinelPorts[1] });
  t.after(() => announcements.disconnect());
  await announcements.subscribe('+switch-master');
  const promoted = new Promise((resolve) => announcements.once('message', resolve));

  const askedSentinelPid = sentinel.sentinelPids[0]!;
  process.kill(askedSentinelPid, 'SIGSTOP'); // sentinel.stop() kills it stopped or not
  await sentinel.nodes[0].stop(true);
  await promoted;
  // The connection's own subscription to that sentinel got the same message; let it be read.
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  process.kill(askedSentinelPid, 'SIGCONT');
  return { sentinel, redis, ended: () => ended };
}

// ioredis gives such a connection up once ("Connection is closed."): what is proved is that it comes back.
const cutShort = 'the reconnect was cut short by the announcement, as the case needs';

test('a Sentinel connection that hears of the failover while it reconnects reaches the promoted primary', { timeout: 60_000 }, async (t) => {
  const { sentinel, redis, ended } = await failOverWhileReconnecting(t, {}, async () => undefined);
  const pong = await eventually('the connection to answer again', 15_000, () => redis.ping().catch(() => undefined));
  assert.equal(pong, 'PONG');
  assert.equal((await redis.info('server')).match(/tcp_port:(\d+)/)?.[1], String(sentinel.nodes[1].port), 'it talks to the promoted replica');
  assert.ok(ended() >= 1, cutShort);
});

test('a pub/sub connection so cut short subscribes again on the promoted primary', { timeout: 60_000 }, async (t) => {
  const messages: string[] = [];
  const { sentinel, ended } = await failOverWhileReconnecting(t, { enableOfflineQueue: true, enableAutoPipelining: false }, async (redis) => {
    redis.on('message', (_channel: string, message: string) => messages.push(message));
    await redis.subscribe('slots');
  });
  const publisher = new Redis({ port: sentinel.nodes[1].port });
  t.after(() => publisher.disconnect());
  // Published until heard: the subscription is back once the connection is.
  await eventually('a message on the promoted primary to arrive', 15_000, async () => {
    await publisher.publish('slots', 'freed');
    return messages.length > 0 ? true : undefined;
  });
  assert.ok(ended() >= 1, cutShort);
});

/** Splitting a long offline queue into pushes within the server's limits (web/src/push.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eventBytes, MAX_PUSH_BYTES, MAX_PUSH_CLIENTS, MAX_PUSH_MUTATIONS, splitPush } from '../src/push.ts';

const m = (clientID: string, id: number, value = 'x') => ({
  clientID,
  id,
  name: 'set',
  args: { cells: [{ ref: 'A1', value }] },
});

test('a queue over the mutation limit goes as several pushes, in order', () => {
  const q = Array.from({ length: 2 * MAX_PUSH_MUTATIONS + 5 }, (_, i) => m('c', i + 1));
  const parts = splitPush(q);
  assert.deepEqual(
    parts.map((p) => p.length),
    [MAX_PUSH_MUTATIONS, MAX_PUSH_MUTATIONS, 5],
  );
  assert.deepEqual(parts.flat(), q, 'every mutation once, in order');
});

test('a push never carries more clients than the limit', () => {
  const q = Array.from({ length: MAX_PUSH_CLIENTS * 2 + 1 }, (_, i) =>
    m(`c${i % (MAX_PUSH_CLIENTS + 1)}`, 1 + Math.floor(i / (MAX_PUSH_CLIENTS + 1))),
  );
  const parts = splitPush(q);
  for (const p of parts) assert.ok(new Set(p.map((x) => x.clientID)).size <= MAX_PUSH_CLIENTS);
  assert.deepEqual(parts.flat(), q);
  assert.equal(parts.length, 3);
});

test('pushes stay under the byte limit, and a small queue is one push', () => {
  const big = 'y'.repeat(1000);
  const q = Array.from({ length: 50 }, (_, i) => m('c', i + 1, big));
  const parts = splitPush(q, { mutations: 1000, clients: 10, bytes: 10_000 });
  for (const p of parts) assert.ok(JSON.stringify(p).length <= 10_000 + p.length);
  assert.ok(parts.length > 1);
  assert.deepEqual(parts.flat(), q);
  assert.deepEqual(splitPush([m('c', 1)]), [[m('c', 1)]]);
  assert.deepEqual(splitPush([]), []);
});

test('bytes are counted as the Lambda event counts them: UTF-8, quotes and backslashes twice', () => {
  assert.equal(eventBytes('abc'), 3);
  assert.equal(eventBytes('"a"'), 5);
  assert.equal(eventBytes(JSON.stringify('a\\b')), 2 + 4 + 2 + 2);
  assert.equal(eventBytes('é'), 2);
});

test('a quote-heavy queue of 5 MB is split so each push fits in the Lambda event', () => {
  // Each value is all quotes: JSON.stringify writes each as \" (2 chars), the event as 4 bytes.
  const quotes = '"'.repeat(4000);
  const q = Array.from({ length: 600 }, (_, i) => m('c', i + 1, quotes));
  const raw = JSON.stringify(q).length;
  assert.ok(raw > 4_800_000 && raw < 6 * 1024 * 1024, `raw ${raw}`);
  const parts = splitPush(q);
  assert.ok(parts.length >= 2, `${parts.length} parts`);
  for (const p of parts) assert.ok(eventBytes(JSON.stringify(p)) <= MAX_PUSH_BYTES, 'within the event budget');
  assert.deepEqual(parts.flat(), q);
});

/** Splitting a long offline queue into pushes within the server's limits (web/src/push.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_PUSH_CLIENTS, MAX_PUSH_MUTATIONS, splitPush } from '../src/push.ts';

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

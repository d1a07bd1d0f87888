/** How the page waits before sending a throttled request again (web/src/api.ts). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retryDelay } from '../src/api.ts';

test('a Retry-After in seconds is obeyed, at most 30 s', () => {
  assert.equal(retryDelay('3', 0), 3000);
  assert.equal(retryDelay('0', 4), 0);
  assert.equal(retryDelay('3600', 0), 30_000);
});

test('without one (API Gateway sends none), the wait is jittered and doubles, at most 10 s', () => {
  assert.equal(
    retryDelay(null, 0, () => 1),
    200,
  );
  assert.equal(
    retryDelay(null, 3, () => 1),
    1600,
  );
  assert.equal(
    retryDelay(null, 12, () => 1),
    10_000,
  );
  assert.equal(
    retryDelay('soon', 1, () => 0.5),
    200,
  );
  assert.equal(
    retryDelay(null, 5, () => 0),
    0,
  );
});

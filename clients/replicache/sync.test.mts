/**
 * The real Replicache client (the `replicache` npm package, in memory) against a running sheetlog
 * API: two clients converge, an offline client's 50 mutations land once and in order, a push
 * whose response is dropped is not applied twice, and a rejected mutation does not block later
 * ones. Run by `scripts/test-sync-client` (part of `./scripts/test`), which starts the local stack
 * and sets SHEETLOG_API_URL.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { type ReadonlyJSONValue, Replicache, type WriteTransaction } from 'replicache';

const BASE = process.env.SHEETLOG_API_URL ?? '';
if (!BASE) throw new Error('SHEETLOG_API_URL is not set: run scripts/test-sync-client');

type Json = Record<string, unknown>;
type CellArgs = { cells: { ref: string; value: ReadonlyJSONValue; format?: string }[] };

/** Per-client network behaviour, keyed by Replicache client id. */
const offline = new Set<string>();
const dropPushResponses = new Map<string, number>();
const realFetch = globalThis.fetch;

globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
  const req = new Request(input, init);
  const requestId = req.headers.get('X-Replicache-RequestID') ?? '';
  const client = requestId.split('-')[0];
  if (offline.has(client)) throw new TypeError('fetch failed: offline (test)');
  const resp = await realFetch(req);
  const drops = dropPushResponses.get(client) ?? 0;
  if (drops > 0 && req.url.endsWith('/replicache/push')) {
    // The server applied the push; the client never hears back and will retry.
    dropPushResponses.set(client, drops - 1);
    await resp.arrayBuffer();
    throw new TypeError('fetch failed: response lost (test)');
  }
  return resp;
};

async function api(method: string, path: string, body?: Json): Promise<Json> {
  const r = await realFetch(`${BASE}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return JSON.parse(text) as Json;
}

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** "B12" → [row 11, col 1]; "B" → col 1. */
function parseA1(ref: string): [number, number] {
  const m = /^([A-Z]+)(\d+)$/.exec(ref);
  if (!m) throw new Error(`not a cell: ${ref}`);
  return [Number(m[2]) - 1, colIndex(m[1])];
}
function colIndex(letters: string): number {
  let col = 0;
  for (const ch of letters) col = col * 26 + (ch.charCodeAt(0) - 64);
  return col - 1;
}
function a1(row: number, col: number): string {
  let s = '';
  for (let n = col + 1; n > 0; n = Math.floor((n - 1) / 26)) s = String.fromCharCode(65 + ((n - 1) % 26)) + s;
  return `${s}${row + 1}`;
}

/** Moves the client's cells for a row or column insert or delete, as the server will. */
async function reshape(tx: WriteTransaction, axis: 0 | 1, op: 'insert' | 'delete', at: number, count: number) {
  const moved: [string, ReadonlyJSONValue][] = [];
  for await (const [key, v] of tx.scan({ prefix: 'cell/' }).entries()) {
    const pos = parseA1(key.slice(5));
    const x = pos[axis];
    let y: number | null = x;
    if (op === 'insert' && x >= at) y = x + count;
    if (op === 'delete' && x >= at) y = x < at + count ? null : x - count;
    if (y === x) continue;
    await tx.del(key);
    if (y === null) continue;
    pos[axis] = y;
    moved.push([`cell/${a1(pos[0], pos[1])}`, v]);
  }
  for (const [k, v] of moved) await tx.set(k, v);
}

type RowArgs = { at: number; count: number; baseSeq?: number };
type ColumnArgs = { at: string; count: number; baseSeq?: number };

/** Client-side mutators: the optimistic effect of each entry type this test uses. */
const mutators = {
  async set(tx: WriteTransaction, args: CellArgs & { baseSeq?: number }) {
    for (const c of args.cells) {
      if (c.value === null) await tx.del(`cell/${c.ref}`);
      else await tx.set(`cell/${c.ref}`, c.format ? { value: c.value, format: c.format } : { value: c.value });
    }
  },
  async 'insert-rows'(tx: WriteTransaction, args: RowArgs) {
    await reshape(tx, 0, 'insert', args.at - 1, args.count);
  },
  async 'delete-rows'(tx: WriteTransaction, args: RowArgs) {
    await reshape(tx, 0, 'delete', args.at - 1, args.count);
  },
  async 'insert-columns'(tx: WriteTransaction, args: ColumnArgs) {
    await reshape(tx, 1, 'insert', colIndex(args.at), args.count);
  },
};

const open: Replicache<typeof mutators>[] = [];

function client(logId: string): Replicache<typeof mutators> {
  const rep = new Replicache({
    name: `sheet-${logId}-${open.length}`,
    kvStore: 'mem',
    pushURL: `${BASE}/logs/${logId}/replicache/push`,
    pullURL: `${BASE}/logs/${logId}/replicache/pull`,
    mutators,
    pullInterval: 200,
    pushDelay: 10,
    logLevel: 'error',
  });
  open.push(rep);
  return rep;
}

async function cells(rep: Replicache<typeof mutators>): Promise<Record<string, unknown>> {
  return rep.query(async (tx) => {
    const out: Record<string, unknown> = {};
    for await (const [k, v] of tx.scan({ prefix: 'cell/' }).entries()) out[k] = v;
    return out;
  });
}

/** Waits until the client has no pending mutations and has pulled the log's current end. */
async function synced(rep: Replicache<typeof mutators>, logId: string): Promise<void> {
  await rep.clientGroupID; // resolves once the client has opened its store
  await until(`client ${rep.clientID} to sync`, async () => {
    const pending = await rep.experimentalPendingMutations();
    if (pending.length > 0) return undefined;
    const serverSeq = (await api('GET', `/logs/${logId}/cells?range=A1`)).seq as number;
    const seen = await rep.query((tx) => tx.get('meta/seq'));
    return seen === serverSeq ? true : undefined;
  });
}

type Run = { clientID: string; mutations: { id: number }[] };

/** The mutation ids of a client in log order, from the `mutations` entries: one client's run, or
 * a group commit's `runs` (queued pushes of several clients written together). */
async function appliedIds(logId: string, clientID: string): Promise<number[]> {
  const page = (await api('GET', `/logs/${logId}/entries?from=0&limit=1000`)) as {
    entries: { type: string; body: Run | { runs: Run[] } }[];
  };
  return page.entries
    .filter((e) => e.type === 'mutations')
    .flatMap((e) => ('runs' in e.body ? e.body.runs : [e.body]))
    .filter((r) => r.clientID === clientID)
    .flatMap((r) => r.mutations.map((m) => m.id));
}

async function newLog(): Promise<string> {
  return (await api('POST', '/logs')).logId as string;
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe('the replicache client against sheetlog', () => {
  after(async () => {
    await Promise.all(open.map((r) => r.close()));
  });

  test('two clients editing one sheet at once converge to the server state', async () => {
    const logId = await newLog();
    const a = client(logId);
    const b = client(logId);
    await Promise.all(
      range(20).map((i) =>
        Promise.all([
          a.mutate.set({
            cells: [
              { ref: `A${i}`, value: i },
              { ref: 'C1', value: `a${i}` },
            ],
          }),
          b.mutate.set({
            cells: [
              { ref: `B${i}`, value: -i },
              { ref: 'C1', value: `b${i}` },
            ],
          }),
        ]),
      ),
    );
    await synced(a, logId);
    await synced(b, logId);
    const [va, vb] = [await cells(a), await cells(b)];
    assert.deepEqual(va, vb);
    assert.equal(Object.keys(va).length, 41);
    const server = (await api('GET', `/logs/${logId}/cells?range=A1:C20`)).values as unknown[][];
    for (const i of range(20)) {
      assert.equal(server[i - 1][0], i);
      assert.equal(server[i - 1][1], -i);
    }
    assert.deepEqual(va['cell/C1'], { value: server[0][2] });
    assert.deepEqual(await appliedIds(logId, a.clientID), range(20));
    assert.deepEqual(await appliedIds(logId, b.clientID), range(20));
  });

  test('50 mutations made offline are applied once, in order, on reconnect', async () => {
    const logId = await newLog();
    const rep = client(logId);
    await synced(rep, logId);
    offline.add(rep.clientID);
    for (const i of range(50)) await rep.mutate.set({ cells: [{ ref: 'D1', value: i }] });
    // Offline, the edits are visible locally at once and nothing reaches the server.
    assert.deepEqual((await cells(rep))['cell/D1'], { value: 50 });
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(await appliedIds(logId, rep.clientID), []);
    offline.delete(rep.clientID);
    await synced(rep, logId);
    assert.deepEqual(await appliedIds(logId, rep.clientID), range(50));
    const c = await api('GET', `/logs/${logId}/clients/${rep.clientID}`);
    assert.equal(c.lastMutationId, 50);
    assert.deepEqual((await api('GET', `/logs/${logId}/cells?range=D1`)).values, [[50]]);
  });

  test('a push whose response is lost and is retried applies nothing twice', async () => {
    const logId = await newLog();
    const rep = client(logId);
    await synced(rep, logId);
    dropPushResponses.set(rep.clientID, 3);
    for (const i of range(10)) await rep.mutate.set({ cells: [{ ref: `E${i}`, value: i * 10 }] });
    await synced(rep, logId);
    // Replicache may learn from a pull that its retried push landed before it uses up every drop.
    const dropped = 3 - (dropPushResponses.get(rep.clientID) ?? 0);
    assert.ok(dropped >= 1, 'at least one push response was lost');
    assert.deepEqual(await appliedIds(logId, rep.clientID), range(10));
    const values = (await api('GET', `/logs/${logId}/cells?range=E1:E10`)).values;
    assert.deepEqual(
      values,
      range(10).map((i) => [i * 10]),
    );
  });

  /** The client's view: the pull cookie its mutations are made against (`baseSeq`). */
  async function baseSeq(rep: Replicache<typeof mutators>): Promise<number> {
    const seq = await rep.query((tx) => tx.get('meta/seq'));
    assert.equal(typeof seq, 'number', 'the client has pulled');
    return seq as number;
  }

  /**
   * Column A holds r1..r6 and both clients have it; then B goes offline, both edit what they see,
   * and B comes back. Returns the server's column A:D, rows 1-8, once both clients are synced
   * and agree with it.
   */
  async function concurrently(
    editA: (a: Replicache<typeof mutators>, base: number) => Promise<void>,
    editB: (b: Replicache<typeof mutators>, base: number) => Promise<void>,
  ): Promise<{ logId: string; server: unknown[][]; b: Replicache<typeof mutators> }> {
    const logId = await newLog();
    await api('POST', `/logs/${logId}/entries`, {
      type: 'set',
      body: { cells: range(6).map((i) => ({ ref: `A${i}`, value: `r${i}` })) },
    });
    const a = client(logId);
    const b = client(logId);
    await synced(a, logId);
    await synced(b, logId);
    offline.add(b.clientID);
    await editB(b, await baseSeq(b));
    await editA(a, await baseSeq(a));
    await synced(a, logId);
    offline.delete(b.clientID);
    await synced(b, logId);
    await synced(a, logId);
    const server = (await api('GET', `/logs/${logId}/cells?range=A1:D8`)).values as unknown[][];
    const view = (c: Record<string, unknown>) =>
      range(8).map((r) =>
        ['A', 'B', 'C', 'D'].map((col) => (c[`cell/${col}${r}`] as { value?: unknown } | undefined)?.value ?? null),
      );
    const cellsOf = (rows: unknown[][]) =>
      range(8).map((r) => [...(rows[r - 1] ?? []), null, null, null, null].slice(0, 4));
    assert.deepEqual(view(await cells(a)), cellsOf(server), 'client A shows the server state');
    assert.deepEqual(view(await cells(b)), cellsOf(server), 'client B shows the server state');
    return { logId, server: cellsOf(server), b };
  }

  /** Undoes (or redoes) the client group's last step through the API; the answer. */
  async function undo(rep: Replicache<typeof mutators>, logId: string, what = 'undo'): Promise<Json> {
    return api('POST', `/logs/${logId}/${what}`, { clientGroupId: await rep.clientGroupID });
  }

  /** The cells of A1:D8 as a client shows them and as the server has them, once synced. */
  async function agreed(logId: string, ...reps: Replicache<typeof mutators>[]): Promise<unknown[][]> {
    for (const r of reps) await synced(r, logId);
    const server = (await api('GET', `/logs/${logId}/cells?range=A1:D8`)).values as unknown[][];
    const grid = (rows: unknown[][]) =>
      range(8).map((r) => [...(rows[r - 1] ?? []), null, null, null, null].slice(0, 4));
    for (const r of reps) {
      const c = await cells(r);
      const view = range(8).map((row) =>
        ['A', 'B', 'C', 'D'].map((col) => (c[`cell/${col}${row}`] as { value?: unknown } | undefined)?.value ?? null),
      );
      assert.deepEqual(view, grid(server), `client ${r.clientID} shows the server state`);
    }
    return grid(server);
  }

  test('A and B edit at once, A undoes: only A’s change goes, and both clients see it', async () => {
    const logId = await newLog();
    const a = client(logId);
    const b = client(logId);
    await Promise.all([
      a.mutate.set({
        cells: [
          { ref: 'A1', value: 'a' },
          { ref: 'C1', value: 'a paste' },
        ],
      }),
      b.mutate.set({ cells: [{ ref: 'B1', value: 'b' }] }),
    ]);
    await agreed(logId, a, b);
    const done = await undo(a, logId);
    assert.equal(done.skipped, 0);
    let grid = await agreed(logId, a, b);
    assert.deepEqual(grid[0], [null, 'b', null, null]);
    await undo(a, logId, 'redo');
    grid = await agreed(logId, a, b);
    assert.deepEqual(grid[0], ['a', 'b', 'a paste', null]);
    await undo(b, logId);
    grid = await agreed(logId, a, b);
    assert.deepEqual(grid[0], ['a', null, 'a paste', null]);
  });

  test('an undo lands on its cells after a row another client inserted above them', async () => {
    const logId = await newLog();
    await api('POST', `/logs/${logId}/entries`, {
      type: 'set',
      body: { cells: range(6).map((i) => ({ ref: `A${i}`, value: `r${i}` })) },
    });
    const a = client(logId);
    const b = client(logId);
    await agreed(logId, a, b);
    await a.mutate.set({
      cells: [
        { ref: 'B5', value: 'a note' },
        { ref: 'A5', value: 'a edit' },
      ],
    });
    await agreed(logId, a, b);
    // B inserts two rows above while offline, against the view before A's edit; then A undoes.
    offline.add(b.clientID);
    await b.mutate['insert-rows']({ at: 2, count: 2, baseSeq: await baseSeq(b) });
    offline.delete(b.clientID);
    await agreed(logId, a, b);
    const done = await undo(a, logId);
    assert.equal(done.skipped, 0, JSON.stringify(done));
    const grid = await agreed(logId, a, b);
    assert.deepEqual(
      grid.map((r) => r.slice(0, 2)),
      [
        ['r1', null],
        [null, null],
        [null, null],
        ['r2', null],
        ['r3', null],
        ['r4', null],
        ['r5', null],
        ['r6', null],
      ],
    );
  });

  test('an edit made offline follows its row through a row inserted meanwhile', async () => {
    const { server } = await concurrently(
      (a, base) => a.mutate['insert-rows']({ at: 2, count: 1, baseSeq: base }),
      (b, base) => b.mutate.set({ cells: [{ ref: 'B5', value: 'note' }], baseSeq: base }),
    );
    assert.deepEqual(server[5], ['r5', 'note', null, null], 'the note sits next to r5, now row 6');
    assert.deepEqual(server[4][1], null);
  });

  test('an edit made offline follows its column through a column inserted meanwhile', async () => {
    const { server } = await concurrently(
      (a, base) => a.mutate['insert-columns']({ at: 'B', count: 1, baseSeq: base }),
      (b, base) => b.mutate.set({ cells: [{ ref: 'B3', value: 'x' }], baseSeq: base }),
    );
    assert.deepEqual(server[2], ['r3', null, 'x', null]);
  });

  test('a row deleted meanwhile takes an edit to it away and moves the edits below', async () => {
    const { logId, server, b } = await concurrently(
      (a, base) => a.mutate['delete-rows']({ at: 3, count: 1, baseSeq: base }),
      async (b, base) => {
        await b.mutate.set({ cells: [{ ref: 'B3', value: 'gone' }], baseSeq: base });
        await b.mutate.set({ cells: [{ ref: 'B5', value: 'next to r5' }], baseSeq: base });
      },
    );
    assert.deepEqual(server.slice(0, 5), [
      ['r1', null, null, null],
      ['r2', null, null, null],
      ['r4', null, null, null],
      ['r5', 'next to r5', null, null],
      ['r6', null, null, null],
    ]);
    const m = await api('GET', `/logs/${logId}/clients/${b.clientID}/mutations/1`);
    assert.equal(m.status, 'rejected');
  });

  test('overlapping row deletes delete each row once', async () => {
    const { server } = await concurrently(
      (a, base) => a.mutate['delete-rows']({ at: 2, count: 2, baseSeq: base }),
      (b, base) => b.mutate['delete-rows']({ at: 3, count: 2, baseSeq: base }),
    );
    assert.deepEqual(
      server.map((row) => row[0]),
      ['r1', 'r5', 'r6', null, null, null, null, null],
    );
  });

  test('a row inserted inside a range deleted meanwhile survives, the rest is deleted once', async () => {
    const { logId, server, b } = await concurrently(
      async (a, base) => {
        await a.mutate['insert-rows']({ at: 3, count: 1, baseSeq: base });
        await a.mutate.set({ cells: [{ ref: 'A3', value: 'new' }], baseSeq: base });
      },
      (b, base) => b.mutate['delete-rows']({ at: 2, count: 3, baseSeq: base }),
    );
    assert.deepEqual(
      server.map((row) => row[0]),
      ['r1', 'new', 'r5', 'r6', null, null, null, null],
    );
    const m = await api('GET', `/logs/${logId}/clients/${b.clientID}/mutations/1`);
    assert.equal(m.status, 'applied');
  });

  test('a mutation the server rejects does not block later ones', async () => {
    const logId = await newLog();
    const rep = client(logId);
    await rep.mutate.set({ cells: [{ ref: 'F1', value: 1 }] });
    // Outside the sheet: applied locally, refused by the server's validation.
    await rep.mutate.set({ cells: [{ ref: 'ZZZZ1', value: 'bad' }] });
    await rep.mutate.set({ cells: [{ ref: 'F2', value: 2 }] });
    await synced(rep, logId);
    const c = await api('GET', `/logs/${logId}/clients/${rep.clientID}`);
    assert.equal(c.lastMutationId, 3);
    const m = await api('GET', `/logs/${logId}/clients/${rep.clientID}/mutations/2`);
    assert.equal(m.status, 'rejected');
    const view = await cells(rep);
    assert.equal(view['cell/ZZZZ1'], undefined, 'the rejected edit is gone from the client');
    assert.deepEqual(view['cell/F2'], { value: 2 });
    assert.deepEqual((await api('GET', `/logs/${logId}/cells?range=F1:F2`)).values, [[1], [2]]);
  });
});

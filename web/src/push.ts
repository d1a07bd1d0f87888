/**
 * Splitting a Replicache push under the server's push limits (docs/sync.md, "Push limits";
 * `MAX_PUSH_MUTATIONS` and `MAX_PUSH_CLIENTS` in functions/core/src/sync_queue.rs). Replicache
 * pushes every pending mutation at once, so a page that was offline for long could hold more than
 * one push may carry; the page's pusher sends such a queue as several pushes, in order.
 */

/** The most mutations one push may carry. */
export const MAX_PUSH_MUTATIONS = 10_000;
/** The most distinct clients one push may carry mutations for. */
export const MAX_PUSH_CLIENTS = 100;
/** Request body bytes a push stays under: the API's 6 MiB request limit, less room for the envelope. */
export const MAX_PUSH_BYTES = 6 * 1024 * 1024 - 64 * 1024;

export interface PushLimits {
  mutations: number;
  clients: number;
  bytes: number;
}

const LIMITS: PushLimits = { mutations: MAX_PUSH_MUTATIONS, clients: MAX_PUSH_CLIENTS, bytes: MAX_PUSH_BYTES };

/**
 * The mutations in order, cut into pushes that each stay within the limits. A mutation alone over
 * the byte limit still gets a push of its own (the server refuses it; nothing smaller can carry it).
 */
export function splitPush<M>(mutations: readonly M[], limits: PushLimits = LIMITS): M[][] {
  const out: M[][] = [];
  let chunk: M[] = [];
  let clients = new Set<string>();
  let bytes = 0;
  for (const m of mutations) {
    const client = (m as { clientID?: unknown }).clientID;
    const id = typeof client === 'string' ? client : '';
    const size = JSON.stringify(m).length + 1;
    const newClient = !clients.has(id);
    const full =
      chunk.length >= limits.mutations ||
      (newClient && clients.size >= limits.clients) ||
      (chunk.length > 0 && bytes + size > limits.bytes);
    if (full) {
      out.push(chunk);
      chunk = [];
      clients = new Set();
      bytes = 0;
    }
    chunk.push(m);
    clients.add(id);
    bytes += size;
  }
  if (chunk.length > 0) out.push(chunk);
  return out;
}

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
/**
 * Bytes a push's body may take in the Lambda event that carries it. Lambda refuses an invocation
 * over 6 MiB, counting the whole event: headers, request context, and the body as a JSON string,
 * where every `"` and `\` takes two bytes (docs/operations.md, "The local API Gateway"). So
 * the budget is 6 MiB less room for the rest of the event, and it is counted escaped
 * ({@link eventBytes}): a quote-heavy push of 4.5 MB can be 6 MB there.
 */
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
    const size = eventBytes(JSON.stringify(m)) + 1;
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

const utf8 = new TextEncoder();

/**
 * The bytes JSON text takes inside the Lambda event, as a JSON string: its UTF-8 bytes, plus
 * one for each `"` and `\` (escaped; JSON.stringify has already escaped control characters).
 */
export function eventBytes(json: string): number {
  let escapes = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x22 || c === 0x5c) escapes++;
  }
  return utf8.encode(json).length + escapes;
}

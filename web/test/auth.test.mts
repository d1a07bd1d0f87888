/**
 * The page's sign-in pieces without a browser: the Cognito calls it makes (against a stand-in
 * for the user pool's JSON API that checks what a real one checks), the session's token
 * handling on a fake clock (refresh before expiry, shared refreshes, sign-out when Cognito
 * refuses the refresh token, kept when offline), `/config.json` parsing, and the catalog's
 * routes. The browser test (sharing.test.mts) runs the same code against the local stack.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { CognitoClient, CognitoError, claims } from '../src/cognito.ts';
import { loadConfig, parseConfig } from '../src/config.ts';
import { REFRESH_MARGIN_MS, refreshAt, Session } from '../src/session.ts';
import { ago, Catalog, can, cleanName } from '../src/sheets.ts';

const CONFIG = {
  region: 'eu-west-1',
  userPoolId: 'eu-west-1_abc',
  clientId: 'client123',
  endpoint: 'http://127.0.0.1:5000/',
};

function b64url(o: unknown): string {
  return Buffer.from(JSON.stringify(o)).toString('base64url');
}
function jwt(sub: string, expSec: number): string {
  return `${b64url({ alg: 'RS256' })}.${b64url({ sub, exp: expSec, token_use: 'access' })}.sig`;
}

// The server's half of Cognito's SRP (as scripts/lib/moto_server.py runs it for the local stack),
// so that the stand-in checks the page's password proofs as Cognito does.
const N = BigInt(
  '0xFFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD' +
    'EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED' +
    'EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F' +
    '83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B' +
    'E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510' +
    '15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7' +
    'ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C' +
    'BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF',
);
const G = 2n;

function padHex(n: bigint): string {
  let h = n.toString(16);
  if (h.length % 2) h = `0${h}`;
  else if (/^[89a-f]/.test(h)) h = `00${h}`;
  return h;
}
function hashHex(hex: string): bigint {
  return BigInt(`0x${createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex')}`);
}
function modPow(base: bigint, exp: bigint, m: bigint): bigint {
  let r = 1n;
  let b = base % m;
  for (let e = exp; e > 0n; e >>= 1n) {
    if (e & 1n) r = (r * b) % m;
    b = (b * b) % m;
  }
  return r;
}
const K = hashHex(padHex(N) + padHex(G));
const poolName = (poolId: string) => poolId.split('_')[1];

interface SrpState {
  salt: bigint;
  v: bigint;
  A: bigint;
  b: bigint;
  B: bigint;
}
function srpChallenge(poolId: string, user: string, password: string, A: bigint): SrpState {
  const salt = BigInt(`0x${randomBytes(16).toString('hex')}`);
  const inner = createHash('sha256')
    .update(`${poolName(poolId)}${user}:${password}`)
    .digest('hex');
  const v = modPow(G, hashHex(padHex(salt) + inner), N);
  const b = BigInt(`0x${randomBytes(32).toString('hex')}`);
  return { salt, v, A, b, B: (K * v + modPow(G, b, N)) % N };
}
function srpSignature(poolId: string, s: SrpState & { username: string }, secretBlock: string, timestamp: string) {
  const u = hashHex(padHex(s.A) + padHex(s.B));
  const S = modPow((s.A * modPow(s.v, u, N)) % N, s.b, N);
  const key = Buffer.from(
    hkdfSync('sha256', Buffer.from(padHex(S), 'hex'), Buffer.from(padHex(u), 'hex'), 'Caldera Derived Key', 16),
  );
  const message = Buffer.concat([
    Buffer.from(poolName(poolId)),
    Buffer.from(s.username),
    Buffer.from(secretBlock, 'base64'),
    Buffer.from(timestamp),
  ]);
  return createHmac('sha256', key).update(message).digest('base64');
}

/**
 * A user pool as far as the page uses it: passwords are checked (by SRP), an invited user must choose a
 * new password first, refresh tokens can be revoked. Counts the calls.
 */
class FakePool {
  users = new Map<string, { password: string; sub: string; forceChange: boolean }>();
  refreshTokens = new Map<string, string>();
  sessions = new Map<string, string>();
  /** Open SRP challenges by SECRET_BLOCK. */
  srp = new Map<string, SrpState & { username: string }>();
  calls: { action: string; body: Record<string, unknown> }[] = [];
  now = () => Date.now();
  lifetimeSec = 3600;
  offline = false;
  private n = 0;

  private issue(username: string, withRefresh: boolean) {
    const u = this.users.get(username);
    if (!u) throw new Error('no user');
    const r: Record<string, unknown> = {
      AccessToken: jwt(u.sub, Math.floor(this.now() / 1000) + this.lifetimeSec),
      IdToken: 'id',
      ExpiresIn: this.lifetimeSec,
      TokenType: 'Bearer',
    };
    if (withRefresh) {
      const t = `refresh-${++this.n}`;
      this.refreshTokens.set(t, username);
      r.RefreshToken = t;
    }
    return { AuthenticationResult: r };
  }

  fetch: typeof fetch = async (url, init) => {
    if (this.offline) throw new TypeError('Failed to fetch');
    assert.equal(String(url), CONFIG.endpoint);
    const headers = init?.headers as Record<string, string>;
    assert.equal(headers['content-type'], 'application/x-amz-json-1.1');
    const action = headers['x-amz-target'].replace('AWSCognitoIdentityProviderService.', '');
    const body = JSON.parse(String(init?.body)) as Record<string, unknown>;
    this.calls.push({ action, body });
    assert.equal(body.ClientId ?? CONFIG.clientId, CONFIG.clientId);
    const fail = (type: string, message: string) =>
      new Response(JSON.stringify({ __type: type, message }), { status: 400 });
    const ok = (o: unknown) => new Response(JSON.stringify(o), { status: 200 });
    const p = (body.AuthParameters ?? {}) as Record<string, string>;
    if (action === 'InitiateAuth' && body.AuthFlow === 'USER_SRP_AUTH') {
      const u = this.users.get(p.USERNAME);
      if (!u) return fail('NotAuthorizedException', 'Incorrect username or password.');
      const secretBlock = randomBytes(48).toString('base64');
      const srp = srpChallenge(CONFIG.userPoolId, p.USERNAME, u.password, BigInt(`0x${p.SRP_A}`));
      this.srp.set(secretBlock, { username: p.USERNAME, ...srp });
      return ok({
        ChallengeName: 'PASSWORD_VERIFIER',
        ChallengeParameters: {
          SALT: padHex(srp.salt),
          SRP_B: srp.B.toString(16),
          USERNAME: p.USERNAME,
          USER_ID_FOR_SRP: p.USERNAME,
          SECRET_BLOCK: secretBlock,
        },
      });
    }
    if (action === 'RespondToAuthChallenge' && body.ChallengeName === 'PASSWORD_VERIFIER') {
      const r = body.ChallengeResponses as Record<string, string>;
      const srp = this.srp.get(r.PASSWORD_CLAIM_SECRET_BLOCK);
      this.srp.delete(r.PASSWORD_CLAIM_SECRET_BLOCK);
      if (!srp || srp.username !== r.USERNAME) return fail('NotAuthorizedException', 'Invalid session');
      const expected = srpSignature(CONFIG.userPoolId, srp, r.PASSWORD_CLAIM_SECRET_BLOCK, r.TIMESTAMP);
      if (expected !== r.PASSWORD_CLAIM_SIGNATURE)
        return fail('NotAuthorizedException', 'Incorrect username or password.');
      const u = this.users.get(srp.username);
      if (u?.forceChange) {
        const s = `session-${++this.n}`;
        this.sessions.set(s, srp.username);
        return ok({
          ChallengeName: 'NEW_PASSWORD_REQUIRED',
          Session: s,
          ChallengeParameters: {
            USERNAME: srp.username,
            USER_ID_FOR_SRP: srp.username,
            userAttributes: JSON.stringify({ email: srp.username }),
            requiredAttributes: '[]',
          },
        });
      }
      return ok(this.issue(srp.username, true));
    }
    if (action === 'InitiateAuth' && body.AuthFlow === 'REFRESH_TOKEN_AUTH') {
      const who = this.refreshTokens.get(p.REFRESH_TOKEN);
      if (!who) return fail('NotAuthorizedException', 'Refresh Token has been revoked');
      return ok(this.issue(who, false));
    }
    if (action === 'RespondToAuthChallenge' && body.ChallengeName === 'NEW_PASSWORD_REQUIRED') {
      const r = body.ChallengeResponses as Record<string, string>;
      const who = this.sessions.get(String(body.Session));
      if (!who || who !== r.USERNAME) return fail('CodeMismatchException', 'Invalid session');
      if (r.NEW_PASSWORD.length < 8)
        return fail('InvalidPasswordException', 'Password does not conform to policy: Password not long enough');
      const u = this.users.get(who);
      if (u) Object.assign(u, { password: r.NEW_PASSWORD, forceChange: false });
      return ok(this.issue(who, true));
    }
    if (action === 'RevokeToken') {
      this.refreshTokens.delete(String(body.Token));
      return ok({});
    }
    return fail('UnknownOperationException', action);
  };
}

class FakeClock {
  t = 1_700_000_000_000;
  timers: { at: number; f: () => void; id: number }[] = [];
  private n = 0;
  now = () => this.t;
  setTimeout = (f: () => void, ms: number) => {
    const id = ++this.n;
    this.timers.push({ at: this.t + ms, f, id });
    return id;
  };
  clearTimeout = (id: unknown) => {
    this.timers = this.timers.filter((x) => x.id !== id);
  };
  /** Moves time on, running the timers that fall due (in order). */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at);
      const next = this.timers[0];
      if (!next || next.at > end) break;
      this.timers.shift();
      this.t = next.at;
      next.f();
      await new Promise((r) => setImmediate(r));
    }
    this.t = end;
  }
}

class MemoryStorage implements Storage {
  private m = new Map<string, string>();
  get length() {
    return this.m.size;
  }
  clear() {
    this.m.clear();
  }
  getItem(k: string) {
    return this.m.get(k) ?? null;
  }
  key(i: number) {
    return [...this.m.keys()][i] ?? null;
  }
  removeItem(k: string) {
    this.m.delete(k);
  }
  setItem(k: string, v: string) {
    this.m.set(k, v);
  }
}

function setup() {
  const pool = new FakePool();
  const clock = new FakeClock();
  pool.now = clock.now;
  pool.users.set('alice@example.com', { password: 'Alice-pass-1', sub: 'sub-alice', forceChange: false });
  pool.users.set('carol@example.com', { password: 'Temp-pass-1', sub: 'sub-carol', forceChange: true });
  const storage = new MemoryStorage();
  const client = new CognitoClient(CONFIG, pool.fetch);
  const session = new Session(client, storage, clock);
  return { pool, clock, storage, client, session };
}

describe('Cognito sign-in', () => {
  test('a right password signs in; a wrong one is said in words', async () => {
    const { pool, session, storage } = setup();
    await assert.rejects(session.signIn('alice@example.com', 'nope'), (e: unknown) => {
      assert.ok(e instanceof CognitoError);
      assert.equal(e.code, 'NotAuthorizedException');
      assert.equal(e.message, 'Wrong email or password.');
      return true;
    });
    assert.equal(session.signedIn, false);
    const r = await session.signIn(' alice@example.com ', 'Alice-pass-1');
    assert.equal(r.kind, 'signed-in');
    assert.equal(session.userId(), 'sub-alice');
    assert.equal(session.email, 'alice@example.com');
    assert.match(session.accessToken() ?? '', /\.sig$/);
    // SRP: A, then a proof; the password itself is in no request.
    assert.deepEqual(
      pool.calls.map((c) => [c.action, c.body.AuthFlow ?? c.body.ChallengeName]),
      [
        ['InitiateAuth', 'USER_SRP_AUTH'],
        ['RespondToAuthChallenge', 'PASSWORD_VERIFIER'],
        ['InitiateAuth', 'USER_SRP_AUTH'],
        ['RespondToAuthChallenge', 'PASSWORD_VERIFIER'],
      ],
    );
    const first = pool.calls[2].body;
    assert.equal(first.ClientId, CONFIG.clientId);
    assert.equal((first.AuthParameters as Record<string, string>).USERNAME, 'alice@example.com');
    assert.match((first.AuthParameters as Record<string, string>).SRP_A, /^[0-9a-f]{700,}$/);
    assert.ok(!JSON.stringify(pool.calls).includes('Alice-pass-1'));
    assert.ok(!JSON.stringify(pool.calls).includes('nope'));
    // The refresh token is kept; the access token is not.
    const kept = JSON.parse(storage.getItem(`sheetlog.cognito.${CONFIG.clientId}`) ?? '{}');
    assert.deepEqual(Object.keys(kept).sort(), ['email', 'refreshToken']);
    assert.ok(!JSON.stringify(kept).includes(session.accessToken() ?? 'x'));
  });

  test('an invited user chooses a new password on the first sign-in', async () => {
    const { session } = setup();
    const r = await session.signIn('carol@example.com', 'Temp-pass-1');
    assert.equal(r.kind, 'new-password');
    assert.equal(session.signedIn, false);
    if (r.kind !== 'new-password') return;
    await assert.rejects(
      session.completeNewPassword(r.session, r.username, 'carol@example.com', 'short'),
      /not long enough/,
    );
    const done = await session.completeNewPassword(r.session, r.username, 'carol@example.com', 'Carol-pass-1');
    assert.equal(done.kind, 'signed-in');
    assert.equal(session.userId(), 'sub-carol');
    // From now on the new password is the one.
    const again = setup();
    again.pool.users = new Map([
      ['carol@example.com', { password: 'Carol-pass-1', sub: 'sub-carol', forceChange: false }],
    ]);
    assert.equal((await again.session.signIn('carol@example.com', 'Carol-pass-1')).kind, 'signed-in');
  });

  test('the access token is refreshed before it expires, and every call sees the new one', async () => {
    const { pool, clock, session } = setup();
    const tokens: string[] = [];
    session.onToken = (t) => tokens.push(t);
    await session.signIn('alice@example.com', 'Alice-pass-1');
    const first = session.accessToken();
    const exp = session.expiresAt() ?? 0;
    assert.equal(exp, clock.t + 3600_000);
    // Not yet: 5 minutes before expiry is the moment.
    await clock.advance(3600_000 - REFRESH_MARGIN_MS - 1000);
    assert.equal(session.accessToken(), first);
    await clock.advance(2000);
    assert.notEqual(session.accessToken(), first);
    assert.ok((session.expiresAt() ?? 0) > exp);
    assert.equal(pool.calls.filter((c) => c.body.AuthFlow === 'REFRESH_TOKEN_AUTH').length, 1);
    // And again an hour later, with the same refresh token (Cognito does not rotate it here).
    await clock.advance(3600_000);
    assert.equal(pool.calls.filter((c) => c.body.AuthFlow === 'REFRESH_TOKEN_AUTH').length, 2);
    assert.equal(tokens.length, 3);
    assert.equal(session.signedIn, true);
  });

  test('a short-lived token is refreshed at half its life; concurrent refreshes share one call', async () => {
    assert.equal(refreshAt(0, 120_000), 60_000);
    assert.equal(refreshAt(0, 3600_000), 3600_000 - REFRESH_MARGIN_MS);
    const { pool, session } = setup();
    await session.signIn('alice@example.com', 'Alice-pass-1');
    const [a, b] = await Promise.all([session.refresh(), session.refresh()]);
    assert.ok(a && b);
    assert.equal(pool.calls.filter((c) => c.body.AuthFlow === 'REFRESH_TOKEN_AUTH').length, 1);
  });

  test('a timer that slept through expiry is caught up by ensureFresh', async () => {
    const { pool, clock, session } = setup();
    await session.signIn('alice@example.com', 'Alice-pass-1');
    clock.timers = []; // the computer slept: the timer never ran
    clock.t += 3600_000;
    const old = session.accessToken();
    await session.ensureFresh();
    assert.notEqual(session.accessToken(), old);
    await session.ensureFresh(); // fresh now: no second call
    assert.equal(pool.calls.filter((c) => c.body.AuthFlow === 'REFRESH_TOKEN_AUTH').length, 1);
  });

  test('a reload signs in from the kept refresh token; a revoked one signs out', async () => {
    const { pool, storage, clock, client, session } = setup();
    await session.signIn('alice@example.com', 'Alice-pass-1');
    const reloaded = new Session(client, storage, clock);
    assert.equal(await reloaded.restore(), true);
    assert.equal(reloaded.userId(), 'sub-alice');
    assert.equal(reloaded.email, 'alice@example.com');
    // Revoked elsewhere: the next refresh fails, the page hears it is signed out.
    pool.refreshTokens.clear();
    const changes: boolean[] = [];
    reloaded.onChange = (s) => changes.push(s);
    assert.equal(await reloaded.refresh(), false);
    assert.deepEqual(changes, [false]);
    assert.equal(reloaded.accessToken(), undefined);
    assert.equal(storage.getItem(`sheetlog.cognito.${CONFIG.clientId}`), null);
    assert.equal(await new Session(client, storage, clock).restore(), false);
  });

  test('offline, a refresh keeps the session and tries again', async () => {
    const { pool, clock, session } = setup();
    await session.signIn('alice@example.com', 'Alice-pass-1');
    pool.offline = true;
    assert.equal(await session.refresh(), true);
    assert.equal(session.signedIn, true);
    pool.offline = false;
    const before = session.accessToken();
    await clock.advance(30_000);
    assert.notEqual(session.accessToken(), before);
  });

  test('sign-out revokes the refresh token and forgets both', async () => {
    const { pool, storage, clock, client, session } = setup();
    await session.signIn('alice@example.com', 'Alice-pass-1');
    const kept = JSON.parse(storage.getItem(`sheetlog.cognito.${CONFIG.clientId}`) ?? '{}').refreshToken;
    await session.signOut();
    assert.equal(session.signedIn, false);
    assert.deepEqual(pool.calls.at(-1), { action: 'RevokeToken', body: { ClientId: CONFIG.clientId, Token: kept } });
    assert.equal(pool.refreshTokens.has(kept), false);
    assert.equal(await new Session(client, storage, clock).restore(), false);
  });

  test('where RevokeToken is missing, sign-out signs out everywhere instead', async () => {
    const calls: string[] = [];
    const f: typeof fetch = async (_u, init) => {
      const a = (init?.headers as Record<string, string>)?.['x-amz-target'] ?? '';
      calls.push(a);
      return a.endsWith('RevokeToken') ? new Response('<html>500</html>', { status: 500 }) : new Response('{}');
    };
    await new CognitoClient(CONFIG, f).revoke('r', 'a');
    assert.deepEqual(calls, [
      'AWSCognitoIdentityProviderService.RevokeToken',
      'AWSCognitoIdentityProviderService.GlobalSignOut',
    ]);
  });

  test('claims reads a JWT payload, base64url and UTF-8 included', () => {
    const t = `x.${Buffer.from(JSON.stringify({ sub: 'ü-1', exp: 5 })).toString('base64url')}.y`;
    assert.deepEqual(claims(t), { sub: 'ü-1', exp: 5 });
    assert.deepEqual(claims('garbage'), {});
  });
});

describe('/config.json', () => {
  test('cognito mode with and without an endpoint', () => {
    assert.deepEqual(parseConfig({ auth: 'cognito', cognito: CONFIG }), { auth: 'cognito', cognito: CONFIG });
    const noEndpoint = parseConfig({ auth: 'cognito', cognito: { ...CONFIG, endpoint: null } });
    assert.equal(noEndpoint.cognito?.endpoint, 'https://cognito-idp.eu-west-1.amazonaws.com/');
    assert.throws(() => parseConfig({ auth: 'cognito', cognito: null }), /which user pool/);
    assert.deepEqual(parseConfig({ auth: 'none', cognito: null }), { auth: 'none', cognito: null });
    assert.deepEqual(parseConfig({ auth: 'weird' }), { auth: 'jwt', cognito: null });
  });

  test('a stack from before /config.json behaves as before', async () => {
    const f: typeof fetch = async () => new Response('not found', { status: 404 });
    assert.deepEqual(await loadConfig(f), { auth: 'jwt', cognito: null });
    const g: typeof fetch = async (u) => {
      assert.equal(u, '/config.json');
      return new Response(JSON.stringify({ auth: 'none', cognito: null }));
    };
    assert.equal((await loadConfig(g)).auth, 'none');
  });
});

describe('the catalog', () => {
  test('routes and bodies as the contract has them', async () => {
    const seen: string[] = [];
    const cat = new Catalog(async <T,>(m: string, p: string, b?: unknown): Promise<T> => {
      seen.push(`${m} ${p}${b === undefined ? '' : ` ${JSON.stringify(b)}`}`);
      if (p.endsWith('/members') && m === 'GET')
        return {
          members: [{ userId: 'u1', email: 'a@x', role: 'owner' }],
          invitations: [{ email: 'u2@x', role: 'viewer', invitedAt: '2026-11-27T00:00:00Z' }],
        } as T;
      return {} as T;
    });
    await cat.list();
    await cat.list('c/+1', 10);
    await cat.create('  Budget  2026 ');
    await cat.create('   ');
    await cat.rename('L', 'Q3');
    await cat.add('L', 'bob@example.com', 'viewer');
    await cat.add('L', 'sub-bob', 'editor');
    await cat.setRole('L', 'sub/bob', 'editor');
    await cat.remove('L', 'u1');
    await cat.uninvite('L', 'Bob+x@example.com');
    assert.equal(await cat.roleOf('L', 'u1'), 'owner');
    assert.equal(await cat.roleOf('L', 'u2'), undefined, 'an invitation is no role');
    assert.deepEqual(
      (await cat.members('L')).invitations.map((i) => i.email),
      ['u2@x'],
    );
    assert.deepEqual(seen, [
      'GET /sheets?limit=50',
      'GET /sheets?limit=10&cursor=c%2F%2B1',
      'POST /logs {"name":"Budget 2026"}',
      'POST /logs {"name":"Untitled"}',
      'PATCH /logs/L {"name":"Q3"}',
      'POST /logs/L/members {"email":"bob@example.com","role":"viewer"}',
      'POST /logs/L/members {"userId":"sub-bob","role":"editor"}',
      'PUT /logs/L/members/sub%2Fbob {"role":"editor"}',
      'DELETE /logs/L/members/u1',
      'DELETE /logs/L/invitations/Bob%2Bx%40example.com',
      'GET /logs/L/members',
      'GET /logs/L/members',
      'GET /logs/L/members',
    ]);
  });

  test('what each role may do on the page', () => {
    assert.deepEqual(
      (['viewer', 'editor', 'owner', undefined] as const).map((r) => [can(r, 'edit'), can(r, 'share')]),
      [
        [false, false],
        [true, false],
        [true, true],
        [false, false],
      ],
    );
    assert.equal(cleanName('x'.repeat(500)).length, 200);
    const now = Date.parse('2026-01-01T12:00:00Z');
    assert.equal(ago('2026-01-01T11:59:30Z', now, 'en'), 'now');
    assert.equal(ago('2026-01-01T11:55:00Z', now, 'en'), '5 minutes ago');
    assert.equal(ago('2026-01-01T09:00:00Z', now, 'en'), '3 hours ago');
    assert.equal(ago('2026-01-01T11:55:00Z', now, 'de'), 'vor 5 Minuten');
    assert.equal(ago('2025-12-24T12:00:00Z', now, 'en-US'), '12/24/2025');
    assert.equal(ago('nonsense', now), '');
  });
});

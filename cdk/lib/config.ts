/**
 * Deployment configuration: every knob a self-hoster can turn, read from CDK context
 * (`cdk deploy -c snapshotInterval=200`, or the `context` block of cdk.json), with the defaults
 * documented in docs/deploy.md. Values are validated up front so a typo fails `cdk synth` with one
 * clear message instead of producing a stack that misbehaves at run time.
 */
import * as fs from 'node:fs';
import type { Node } from 'constructs';
import { SetupError } from './errors';

/** CloudWatch Logs only accepts these retention periods (days). */
export const LOG_RETENTION_DAYS_ALLOWED = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;

export type FunctionArchitecture = 'arm64' | 'x86_64';
/** The two ways a push is written (docs/sync.md). */
export const SYNC_WRITES = ['queued', 'direct'] as const;
export type SyncWrites = (typeof SYNC_WRITES)[number];
/** Cargo profiles of the workspace the functions may be built with (Cargo.toml). */
export const LAMBDA_PROFILES = ['release', 'lambda-check'] as const;
export type LambdaProfile = (typeof LAMBDA_PROFILES)[number];

/**
 * How requests to the HTTP API (and subscriptions to pokes) are authorized (docs/deploy.md,
 * "Authorization modes"): `iam` SigV4 signatures; `jwt` tokens of an identity provider of your
 * own, with the logs a token may use in one of its claims; `cognito` tokens of a user pool the
 * stack creates, with each person's sheets in the catalog table.
 */
export const AUTH_MODES = ['iam', 'jwt', 'cognito'] as const;
export type AuthMode = (typeof AUTH_MODES)[number];

/** Multi-factor authentication of the stack's user pool: TOTP apps only (no SMS to pay for or configure). */
export const COGNITO_MFA = ['off', 'optional', 'required'] as const;
export type CognitoMfa = (typeof COGNITO_MFA)[number];

export interface CognitoConfig {
  /** People may create their own account; off (the default): an administrator invites each person. */
  readonly selfSignUp: boolean;
  /** TOTP multi-factor authentication: `optional` (each person may turn it on), `required` or `off`. */
  readonly mfa: CognitoMfa;
}

export interface JwtAuthorizerConfig {
  /** Token issuer URL (https), e.g. a Cognito user pool or any OIDC provider. */
  readonly issuer: string;
  /** Accepted `aud` (or Cognito `client_id`) values. */
  readonly audience: string[];
  /** The claim listing the logs a token may use (`SHEETLOG_ACCESS_CLAIM`, docs/api.md "Access to logs"). */
  readonly accessClaim: string;
}

export interface SheetlogConfig {
  /** CloudFormation stack name; a unique one per deployment in the same account and region. */
  readonly stackName: string;
  /** Lambda architecture the functions are built for. */
  readonly architecture: FunctionArchitecture;
  /**
   * Cargo profile the functions are built with: `release` for anything deployed. `lambda-check`
   * (unoptimised, no debug info) is what `./scripts/test` synthesizes with: it proves the functions
   * cross-compile and bundle for Lambda in a third of the time, and is far too slow to deploy.
   */
  readonly lambdaProfile: LambdaProfile;
  /** A Snapshot entry is appended after this many entries (`SHEETLOG_SNAPSHOT_INTERVAL`). */
  readonly snapshotInterval: number;
  /** A segment is ended after this many entries (`SHEETLOG_SEGMENT_MAX_ENTRIES`). */
  readonly segmentMaxEntries: number;
  /**
   * Expected idempotency keys per month across all logs (`SHEETLOG_DEDUPE_KEYS_PER_MONTH`): sizes
   * the Dedupe table's hash prefix so its items stay under 1 KB (docs/storage.md). Changing it
   * later moves every key, so retries of requests made before the change are not recognised.
   */
  readonly dedupeKeysPerMonth: number;
  /** Entry bodies larger than this are offloaded to S3 (`SHEETLOG_INLINE_BODY_MAX_BYTES`). */
  readonly inlineBodyMaxBytes: number;
  /** Uploaded or offloaded objects still tagged for auto-delete expire after this many days. */
  readonly autoDeleteDays: number;
  /**
   * A deleted (or expired) bucket object is kept as a noncurrent version this many days, so a
   * mistaken delete can be undone (docs/operations.md, "Backups and restore"); then it goes.
   */
  readonly noncurrentVersionDays: number;
  /** Adds an AWS Backup plan: a daily backup of every table, kept `backupRetentionDays`. */
  readonly backupPlan: boolean;
  /** How long the backup plan keeps each daily backup. */
  readonly backupRetentionDays: number;
  /** Lifetime of presigned upload/download URLs (`SHEETLOG_UPLOAD_URL_TTL_SECS`). */
  readonly uploadUrlTtlSecs: number;
  /** Largest file an upload URL is signed for and a commit accepts (`SHEETLOG_MAX_UPLOAD_BYTES`). */
  readonly maxUploadBytes: number;
  /** A claimed pending snapshot not checkpointed for this long may be taken over (`SHEETLOG_PENDING_TIMEOUT_SECS`). */
  readonly pendingTimeoutSecs: number;
  /** Retention of the functions' and the API's log groups. */
  readonly logRetentionDays: number;
  /** `RUST_LOG` filter for every function. */
  readonly logLevel: string;
  /**
   * The authorization mode. Unset in the settings: `jwt` when `jwtIssuer` is set, else `iam`
   * (the behaviour before `cognito` existed, so an existing configuration keeps its mode).
   */
  readonly authMode: AuthMode;
  /** Set exactly when `authMode` is `jwt`: the HTTP API accepts JWTs from this issuer. */
  readonly jwt?: JwtAuthorizerConfig;
  /** Set exactly when `authMode` is `cognito`: the stack's user pool. */
  readonly cognito?: CognitoConfig;
  /**
   * Origins allowed by the API's CORS preflight and the bucket's CORS rule. Empty (the default):
   * no CORS at all, so no web page on another origin can call the API or use its presigned URLs
   * from a browser. A browser client's origin has to be listed.
   */
  readonly corsAllowedOrigins: string[];
  /**
   * Steady-state request rate limit of the HTTP API (requests per second). Every push pokes the
   * sheet and every open page pulls on a poke, so one sheet of 100 editors asks for bursts of
   * about 1,000 requests a second (`docs/bench/hot-throttle.json`, `./scripts/bench hot
   * --throttle RATE:BURST`): below that its pages wait on `429`s.
   */
  readonly throttlingRateLimit: number;
  /** Burst limit of the HTTP API (requests). */
  readonly throttlingBurstLimit: number;
  /**
   * Segment retention (`docs/storage.md`, "Archived segments"): `keep` everything in DynamoDB,
   * `archive` old segments to S3 (readers read them there transparently), or `delete` them.
   */
  readonly retentionMode: 'keep' | 'archive' | 'delete';
  /** Segments of each log kept in DynamoDB, newest first (`SHEETLOG_RETENTION_KEEP_SEGMENTS`). */
  readonly retentionKeepSegments: number;
  /** Also move segments that ended more than this many days ago (`SHEETLOG_RETENTION_AFTER_DAYS`). */
  readonly retentionAfterDays?: number;
  /**
   * How Replicache pushes are written (`SHEETLOG_SYNC_WRITES`, docs/sync.md "Queued pushes"):
   * `queued` enqueues each push on the FIFO sync queue and the sync writer applies a log's pushes
   * one batch at a time (the default: `bench hot` measures it ahead at every editor count);
   * `direct` appends in the API's request, racing the log's other writers. The queue and the
   * writer are deployed in either mode.
   */
  readonly syncWrites: SyncWrites;
  /** When set, alarm notifications are also sent to this address (the subscription must be confirmed). */
  readonly alarmEmail?: string;
  /**
   * Sandbox stacks only: tables and bucket are deleted with the stack (no deletion protection,
   * no RETAIN, bucket emptied on delete). Never set this for a deployment that holds real data.
   */
  readonly ephemeral: boolean;
  /** Must equal `stackName` for `ephemeral` to apply (a guard against destroying real data). */
  readonly ephemeralConfirm?: string;
}

/**
 * The shortest auto-delete expiry: the stream router retries a batch for 23 hours before a
 * committed payload's tag is removed, and an outage must not let it expire meanwhile.
 */
export const MIN_AUTO_DELETE_DAYS = 3;

/** The JWT claim listing a token's logs, unless `jwtAccessClaim` names another. */
export const DEFAULT_ACCESS_CLAIM = 'sheetlog_logs';

export const DEFAULT_CONFIG: SheetlogConfig = {
  stackName: 'sheetlog',
  architecture: 'arm64',
  lambdaProfile: 'release',
  snapshotInterval: 100,
  segmentMaxEntries: 10_000,
  dedupeKeysPerMonth: 1_000_000,
  inlineBodyMaxBytes: 16_384,
  autoDeleteDays: 3,
  noncurrentVersionDays: 30,
  backupPlan: false,
  backupRetentionDays: 365,
  uploadUrlTtlSecs: 900,
  maxUploadBytes: 268_435_456,
  pendingTimeoutSecs: 120,
  logRetentionDays: 30,
  logLevel: 'info',
  authMode: 'iam',
  jwt: undefined,
  cognito: undefined,
  corsAllowedOrigins: [],
  throttlingRateLimit: 1000,
  throttlingBurstLimit: 2000,
  retentionMode: 'keep',
  retentionKeepSegments: 3,
  retentionAfterDays: undefined,
  syncWrites: 'queued',
  alarmEmail: undefined,
  ephemeral: false,
  ephemeralConfirm: undefined,
};

/** The context keys this app reads; anything else in context is CDK's business. */
export const CONFIG_CONTEXT_KEYS = [
  'stackName',
  'architecture',
  'lambdaProfile',
  'snapshotInterval',
  'segmentMaxEntries',
  'dedupeKeysPerMonth',
  'inlineBodyMaxBytes',
  'autoDeleteDays',
  'noncurrentVersionDays',
  'backupPlan',
  'backupRetentionDays',
  'uploadUrlTtlSecs',
  'maxUploadBytes',
  'pendingTimeoutSecs',
  'logRetentionDays',
  'logLevel',
  'authMode',
  'cognitoSelfSignUp',
  'cognitoMfa',
  'jwtIssuer',
  'jwtAudience',
  'jwtAccessClaim',
  'corsAllowedOrigins',
  'retentionMode',
  'retentionKeepSegments',
  'retentionAfterDays',
  'throttlingRateLimit',
  'throttlingBurstLimit',
  'syncWrites',
  'alarmEmail',
  'ephemeral',
  'ephemeralConfirm',
] as const;

export type ConfigContextKey = (typeof CONFIG_CONTEXT_KEYS)[number];

/** Thrown for invalid context; the message lists every problem, one per line. */
export class ConfigError extends SetupError {
  constructor(readonly problems: string[]) {
    super(`Invalid sheetlog configuration (CDK context):\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

type Lookup = (key: ConfigContextKey) => unknown;

/** Reads and validates the configuration from a construct node's context (usually the App's). */
/**
 * The customer's own settings file, at the repository root: git-ignored, so an upgrade (`git pull`)
 * never conflicts with it. `SHEETLOG_CONFIG` names another file.
 */
export const CONFIG_FILE_NAME = 'sheetlog.config.json';

/** The settings in a file (a JSON object of configuration keys); none when the file does not exist. */
export function readConfigFile(file: string): Partial<Record<ConfigContextKey, unknown>> {
  if (!fs.existsSync(file)) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ConfigError([`${file}: not valid JSON (${(e as Error).message})`]);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError([`${file}: expected a JSON object of settings, such as {"snapshotInterval": 200}`]);
  }
  const known: readonly string[] = CONFIG_CONTEXT_KEYS;
  const unknown = Object.keys(parsed).filter((k) => !known.includes(k));
  if (unknown.length > 0) {
    throw new ConfigError(
      unknown.map((k) => `${file}: unknown setting ${JSON.stringify(k)} (the keys are in docs/deploy.md)`),
    );
  }
  return parsed as Partial<Record<ConfigContextKey, unknown>>;
}

/**
 * The configuration from CDK context (`-c key=value`, `cdk.json`, `~/.cdk.json`), then from the
 * settings file for keys the context does not set. `file: null` reads no file (tests).
 */
export function configFromContext(node: Node, file: string | null): SheetlogConfig {
  const fromFile = file === null ? {} : readConfigFile(file);
  return parseConfig((key) => node.tryGetContext(key) ?? fromFile[key]);
}

/** Reads and validates the configuration from plain values (context from the CLI arrives as strings). */
export function parseConfig(lookup: Lookup | Partial<Record<ConfigContextKey, unknown>>): SheetlogConfig {
  const get: Lookup = typeof lookup === 'function' ? lookup : (key) => lookup[key];
  const problems: string[] = [];
  const p = new Parser(get, problems);

  const config: SheetlogConfig = {
    stackName: p.string('stackName', DEFAULT_CONFIG.stackName, {
      pattern: /^[A-Za-z][A-Za-z0-9-]{0,127}$/,
      hint: 'letters, digits and hyphens, starting with a letter, at most 128 characters',
    }),
    architecture: p.oneOf('architecture', DEFAULT_CONFIG.architecture, ['arm64', 'x86_64'] as const),
    lambdaProfile: p.oneOf('lambdaProfile', DEFAULT_CONFIG.lambdaProfile, LAMBDA_PROFILES),
    snapshotInterval: p.integer('snapshotInterval', DEFAULT_CONFIG.snapshotInterval, 2, 100_000),
    segmentMaxEntries: p.integer('segmentMaxEntries', DEFAULT_CONFIG.segmentMaxEntries, 10, 1_000_000),
    dedupeKeysPerMonth: p.integer('dedupeKeysPerMonth', DEFAULT_CONFIG.dedupeKeysPerMonth, 1, 1_000_000_000_000),
    // DynamoDB items are limited to 400 KB; keep room for the other attributes and the keys.
    inlineBodyMaxBytes: p.integer('inlineBodyMaxBytes', DEFAULT_CONFIG.inlineBodyMaxBytes, 0, 350_000),
    autoDeleteDays: p.integer(
      'autoDeleteDays',
      DEFAULT_CONFIG.autoDeleteDays,
      MIN_AUTO_DELETE_DAYS,
      365,
      undefined,
      'the stream router retries a failed batch for up to 23 hours before the auto-delete tag of a committed payload is removed, so a shorter expiry could delete committed data during an outage',
    ),
    noncurrentVersionDays: p.integer('noncurrentVersionDays', DEFAULT_CONFIG.noncurrentVersionDays, 1, 3_650),
    backupPlan: p.boolean('backupPlan', DEFAULT_CONFIG.backupPlan),
    // AWS Backup needs a retention of at least a day; past point-in-time recovery's 35 is the point.
    backupRetentionDays: p.integer('backupRetentionDays', DEFAULT_CONFIG.backupRetentionDays, 1, 36_500),
    // URLs are presigned with the function's temporary role credentials, which outlive an hour
    // only sometimes; a longer TTL would promise more than S3 will honour.
    uploadUrlTtlSecs: p.integer('uploadUrlTtlSecs', DEFAULT_CONFIG.uploadUrlTtlSecs, 60, 3_600),
    // A commit copies the upload with one CopyObject, which S3 allows up to 5 GB; the snapshot
    // worker streams the file through Lambda's /tmp (10 GB at most).
    maxUploadBytes: p.integer('maxUploadBytes', DEFAULT_CONFIG.maxUploadBytes, 1, 5 * 1024 ** 3),
    pendingTimeoutSecs: p.integer('pendingTimeoutSecs', DEFAULT_CONFIG.pendingTimeoutSecs, 10, 900),
    logRetentionDays: p.integer(
      'logRetentionDays',
      DEFAULT_CONFIG.logRetentionDays,
      1,
      3_653,
      LOG_RETENTION_DAYS_ALLOWED,
    ),
    logLevel: p.string('logLevel', DEFAULT_CONFIG.logLevel, {
      pattern: /^[A-Za-z0-9_:=,.-]+$/,
      hint: 'a RUST_LOG filter such as "info" or "info,sheetlog_core=debug"',
    }),
    ...authConfig(get, problems),
    corsAllowedOrigins: p.list('corsAllowedOrigins', DEFAULT_CONFIG.corsAllowedOrigins, {
      pattern: /^(\*|https?:\/\/[^\s/,]+)$/,
      hint: '"*" or origins such as "https://sheets.example.com" (scheme and host, no path)',
    }),
    throttlingRateLimit: p.integer('throttlingRateLimit', DEFAULT_CONFIG.throttlingRateLimit, 1, 10_000),
    throttlingBurstLimit: p.integer('throttlingBurstLimit', DEFAULT_CONFIG.throttlingBurstLimit, 1, 5_000),
    retentionMode: p.oneOf('retentionMode', DEFAULT_CONFIG.retentionMode, ['keep', 'archive', 'delete'] as const),
    // Loads and updates read the two newest segments; those are never moved.
    retentionKeepSegments: p.integer('retentionKeepSegments', DEFAULT_CONFIG.retentionKeepSegments, 2, 100_000),
    retentionAfterDays: p.optionalInteger('retentionAfterDays', 1, 36_500),
    syncWrites: p.oneOf('syncWrites', DEFAULT_CONFIG.syncWrites, SYNC_WRITES),
    alarmEmail: p.optionalString('alarmEmail', {
      pattern: /^[^\s@]+@[^\s@]+\.[^\s@]+$/,
      hint: 'an email address',
    }),
    ephemeral: p.boolean('ephemeral', DEFAULT_CONFIG.ephemeral),
    ephemeralConfirm: p.optionalString('ephemeralConfirm', {
      pattern: /^[A-Za-z][A-Za-z0-9-]{0,127}$/,
      hint: 'the stack name, confirming that its tables and bucket may be deleted with it',
    }),
  };

  // `ephemeral` switches the tables and the bucket to DESTROY: applied to a stack that holds data,
  // the next `cdk destroy` (or a replaced table) deletes it. It takes a second setting that names
  // the stack, so neither a stray `-c ephemeral=true` nor one meant for another stack applies it.
  // `scripts/deploy` sets it itself for a stack that does not exist yet, and refuses otherwise.
  if (config.ephemeral && config.ephemeralConfirm !== config.stackName) {
    problems.push(
      `ephemeral=true makes the tables and bucket of stack ${JSON.stringify(config.stackName)} deleted with the stack: ` +
        `confirm with -c ephemeralConfirm=${config.stackName} (only for a sandbox that holds no data; docs/deploy.md)` +
        (config.ephemeralConfirm === undefined
          ? ''
          : ` (ephemeralConfirm=${JSON.stringify(config.ephemeralConfirm)} names another stack)`),
    );
  }
  if (!config.ephemeral && config.ephemeralConfirm !== undefined) {
    problems.push('ephemeralConfirm is set but ephemeral is not: it only confirms ephemeral=true');
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** The default cognito settings. */
export const DEFAULT_COGNITO: CognitoConfig = { selfSignUp: false, mfa: 'optional' };

/**
 * `authMode` and the settings of that mode. Settings of another mode are refused rather than
 * ignored: `jwtIssuer` left in a file after switching to `cognito` would otherwise suggest a JWT
 * authorizer that is not there.
 */
function authConfig(get: Lookup, problems: string[]): Pick<SheetlogConfig, 'authMode' | 'jwt' | 'cognito'> {
  const p = new Parser(get, problems);
  const explicit = p.optionalOneOf('authMode', AUTH_MODES);
  const jwtKeys = (['jwtIssuer', 'jwtAudience', 'jwtAccessClaim'] as const).filter((k) => isSet(get(k)));
  const cognitoKeys = (['cognitoSelfSignUp', 'cognitoMfa'] as const).filter((k) => isSet(get(k)));
  const authMode: AuthMode = explicit ?? (isSet(get('jwtIssuer')) || isSet(get('jwtAudience')) ? 'jwt' : 'iam');
  if (authMode !== 'jwt' && jwtKeys.length > 0 && explicit !== undefined) {
    problems.push(
      `${jwtKeys.join(', ')} ${jwtKeys.length > 1 ? 'are' : 'is'} set but authMode=${authMode}: ` +
        'the jwt* settings apply to authMode=jwt only; remove them',
    );
  }
  if (authMode !== 'cognito' && cognitoKeys.length > 0) {
    problems.push(
      `${cognitoKeys.join(', ')} ${cognitoKeys.length > 1 ? 'are' : 'is'} set but authMode=${authMode}: ` +
        'the cognito* settings apply to authMode=cognito only',
    );
  }
  if (authMode === 'jwt') {
    const jwt = jwtConfig(get, problems);
    if (jwt === undefined && explicit === 'jwt' && !isSet(get('jwtIssuer')) && !isSet(get('jwtAudience'))) {
      problems.push('authMode=jwt needs jwtIssuer and jwtAudience (your identity provider; docs/deploy.md)');
    }
    return { authMode, jwt, cognito: undefined };
  }
  if (authMode === 'iam' && explicit === undefined) {
    // No mode and no issuer: today's IAM stack, but a stray jwtAccessClaim is still an error.
    jwtConfig(get, problems);
    return { authMode, jwt: undefined, cognito: undefined };
  }
  if (authMode === 'cognito') {
    return {
      authMode,
      jwt: undefined,
      cognito: {
        selfSignUp: p.boolean('cognitoSelfSignUp', DEFAULT_COGNITO.selfSignUp),
        mfa: p.oneOf('cognitoMfa', DEFAULT_COGNITO.mfa, COGNITO_MFA),
      },
    };
  }
  return { authMode, jwt: undefined, cognito: undefined };
}

function isSet(raw: unknown): boolean {
  return raw !== undefined && raw !== null && raw !== '';
}

function jwtConfig(get: Lookup, problems: string[]): JwtAuthorizerConfig | undefined {
  const p = new Parser(get, problems);
  const issuer = p.optionalString('jwtIssuer', {
    pattern: /^https:\/\/[^\s]+$/,
    hint: 'an https URL such as "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbCdEf"',
  });
  const audience = p.list('jwtAudience', [], { pattern: /^[^\s,]+$/, hint: 'comma-separated client ids' });
  const accessClaim = p.string('jwtAccessClaim', DEFAULT_ACCESS_CLAIM, {
    pattern: /^[A-Za-z0-9_:./-]{1,128}$/,
    hint: 'a claim name such as "sheetlog_logs" (one your token issuer writes, never one users can edit)',
  });
  if (issuer === undefined && audience.length === 0) {
    if (get('jwtAccessClaim') !== undefined) {
      problems.push(
        'jwtAccessClaim is set but jwtIssuer and jwtAudience are not: it applies to JWT authorization only',
      );
    }
    return undefined;
  }
  if (issuer === undefined) {
    problems.push('jwtAudience is set but jwtIssuer is not: set both to enable the JWT authorizer, or neither for IAM');
    return undefined;
  }
  if (audience.length === 0) {
    problems.push('jwtIssuer is set but jwtAudience is not: set both to enable the JWT authorizer, or neither for IAM');
    return undefined;
  }
  return { issuer, audience, accessClaim };
}

interface StringRule {
  readonly pattern: RegExp;
  readonly hint: string;
}

/** Small typed readers; each records a problem and returns the default so all problems are reported at once. */
class Parser {
  constructor(
    private readonly get: Lookup,
    private readonly problems: string[],
  ) {}

  integer(
    key: ConfigContextKey,
    fallback: number,
    min: number,
    max: number,
    allowed?: readonly number[],
    why?: string,
  ): number {
    const raw = this.get(key);
    if (raw === undefined || raw === null) return fallback;
    const text = typeof raw === 'number' ? String(raw) : typeof raw === 'string' ? raw.trim() : undefined;
    const value = text !== undefined && /^-?\d+$/.test(text) ? Number(text) : NaN;
    if (!Number.isSafeInteger(value)) {
      this.problems.push(`${key}=${show(raw)}: expected a whole number (default ${fallback})`);
      return fallback;
    }
    if (allowed !== undefined && !allowed.includes(value)) {
      this.problems.push(`${key}=${value}: expected one of ${allowed.join(', ')} (default ${fallback})`);
      return fallback;
    }
    if (value < min || value > max) {
      const reason = why === undefined ? '' : `: ${why}`;
      this.problems.push(
        `${key}=${value}: expected a whole number from ${min} to ${max} (default ${fallback})${reason}`,
      );
      return fallback;
    }
    return value;
  }

  /** A whole number, or `undefined` when not set. */
  optionalInteger(key: ConfigContextKey, min: number, max: number): number | undefined {
    const raw = this.get(key);
    if (raw === undefined || raw === null || raw === '') return undefined;
    const problems = this.problems.length;
    const value = this.integer(key, Number.NaN, min, max);
    return this.problems.length > problems ? undefined : value;
  }

  boolean(key: ConfigContextKey, fallback: boolean): boolean {
    const raw = this.get(key);
    if (raw === undefined || raw === null) return fallback;
    if (raw === true || raw === 'true') return true;
    if (raw === false || raw === 'false') return false;
    this.problems.push(`${key}=${show(raw)}: expected true or false (default ${fallback})`);
    return fallback;
  }

  string(key: ConfigContextKey, fallback: string, rule: StringRule): string {
    return this.optionalString(key, rule) ?? fallback;
  }

  optionalString(key: ConfigContextKey, rule: StringRule): string | undefined {
    const raw = this.get(key);
    if (raw === undefined || raw === null || raw === '') return undefined;
    if (typeof raw !== 'string' || !rule.pattern.test(raw)) {
      this.problems.push(`${key}=${show(raw)}: expected ${rule.hint}`);
      return undefined;
    }
    return raw;
  }

  /** One of `values`, or `undefined` when not set (or not valid: the problem is recorded). */
  optionalOneOf<T extends string>(key: ConfigContextKey, values: readonly T[]): T | undefined {
    const raw = this.get(key);
    if (raw === undefined || raw === null || raw === '') return undefined;
    if (typeof raw === 'string' && (values as readonly string[]).includes(raw)) return raw as T;
    this.problems.push(`${key}=${show(raw)}: expected one of ${values.join(', ')}`);
    return undefined;
  }

  oneOf<T extends string>(key: ConfigContextKey, fallback: T, values: readonly T[]): T {
    const raw = this.get(key);
    if (raw === undefined || raw === null || raw === '') return fallback;
    if (typeof raw === 'string' && (values as readonly string[]).includes(raw)) return raw as T;
    this.problems.push(`${key}=${show(raw)}: expected one of ${values.join(', ')} (default ${fallback})`);
    return fallback;
  }

  /** A list given as a JSON array in cdk.json or as a comma-separated string on the command line. */
  list(key: ConfigContextKey, fallback: string[], rule: StringRule): string[] {
    const raw = this.get(key);
    if (raw === undefined || raw === null || raw === '') return fallback;
    const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',').map((s) => s.trim()) : undefined;
    if (items === undefined || items.length === 0) {
      this.problems.push(`${key}=${show(raw)}: expected a comma-separated list of ${rule.hint}`);
      return fallback;
    }
    const bad = items.filter((item) => typeof item !== 'string' || !rule.pattern.test(item));
    if (bad.length > 0) {
      this.problems.push(`${key}: ${bad.map(show).join(', ')} not accepted; expected ${rule.hint}`);
      return fallback;
    }
    return items as string[];
  }
}

function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

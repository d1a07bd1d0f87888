/**
 * What the local stack must create, as plain JSON, derived from the synthesized CloudFormation
 * template (not from the constructs), so the description is of exactly what `cdk deploy` creates.
 * The Rust local runner is compared against it: table keys and attribute types, stream view type,
 * TTL attribute, bucket lifecycle rules and CORS, queue attributes and redrive, the event-source
 * mappings with the Entry-stream filter, every function's environment, and the HTTP API's routes
 * without an authorizer (which the local authorizer stand-in must open, and no others).
 *
 * Print it with `npx tsx cdk/bin/local-resources.ts` (same `-c key=value` context as `cdk synth`).
 */
import type { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { BINARY_TAG } from './constructs/sheetlog-function';

/** Bumped on any incompatible change to the shape below. */
export const LOCAL_RESOURCES_FORMAT = 2;

export interface KeyAttribute {
  readonly name: string;
  /** DynamoDB scalar type: `S`, `N` or `B`. */
  readonly type: string;
}

export interface LocalTable {
  readonly logicalId: string;
  /** The environment variable that carries the table's name to the functions, if any. */
  readonly env: string | null;
  readonly partitionKey: KeyAttribute;
  readonly sortKey: KeyAttribute | null;
  readonly billingMode: string;
  readonly streamViewType: string | null;
  readonly ttlAttribute: string | null;
  /**
   * Global secondary indexes, present only on a table that has some (the Catalog table of
   * `authMode=cognito`), so the description of a stack without any keeps its shape.
   */
  readonly globalSecondaryIndexes?: LocalIndex[];
}

export interface LocalIndex {
  readonly name: string;
  readonly partitionKey: KeyAttribute;
  readonly sortKey: KeyAttribute | null;
  /** `ALL`, `KEYS_ONLY` or `INCLUDE`. */
  readonly projection: string;
}

export interface LocalLifecycleRule {
  readonly id: string | null;
  readonly enabled: boolean;
  readonly prefix: string | null;
  /** Objects must carry all of these tags (key -> value) for the rule to apply. */
  readonly tags: Record<string, string>;
  readonly expirationDays: number | null;
  readonly abortIncompleteMultipartUploadDays: number | null;
  /** Noncurrent versions expire after this many days (versioned buckets). */
  readonly noncurrentVersionDays: number | null;
  /** Delete markers with no version left behind them are removed. */
  readonly expiredObjectDeleteMarker: boolean;
}

export interface LocalCorsRule {
  readonly allowedMethods: string[];
  readonly allowedOrigins: string[];
  readonly allowedHeaders: string[];
  readonly exposedHeaders: string[];
  readonly maxAgeSeconds: number | null;
}

export interface LocalBucket {
  readonly logicalId: string;
  readonly env: string | null;
  readonly versioned: boolean;
  readonly lifecycleRules: LocalLifecycleRule[];
  readonly cors: LocalCorsRule[];
}

export interface LocalQueue {
  readonly logicalId: string;
  readonly env: string | null;
  readonly fifo: boolean;
  readonly visibilityTimeoutSecs: number;
  readonly messageRetentionSecs: number;
  readonly deadLetter: { readonly logicalId: string; readonly maxReceiveCount: number } | null;
}

/**
 * A value in a function's environment: a literal; `{ref: <logicalId>}` for the `Ref` of a resource
 * of the stack (a table's or bucket's name, a queue's URL), which the local runner substitutes with
 * its own resource's name or URL; `{cfn: …}` for any other CloudFormation expression.
 */
export type LocalEnvValue = string | { readonly ref: string } | { readonly cfn: unknown };

export interface LocalFunction {
  /** The binary (crate) name, from the function's `sheetlog:binary` tag. */
  readonly binary: string;
  readonly timeoutSecs: number;
  /** Lambda's memory size (MB); CPU is allotted in proportion to it. */
  readonly memoryMb: number;
  readonly environment: Record<string, LocalEnvValue>;
}

export interface LocalStreamConsumer {
  readonly function: string;
  readonly table: string;
  readonly startingPosition: string;
  readonly batchSize: number | null;
  /** Event patterns (parsed JSON); a record is delivered when any one matches. */
  readonly filterPatterns: unknown[];
  readonly reportBatchItemFailures: boolean;
  readonly maximumRetryAttempts: number | null;
  readonly onFailureQueue: string | null;
}

export interface LocalQueueConsumer {
  readonly function: string;
  readonly queue: string;
  readonly batchSize: number | null;
  readonly reportBatchItemFailures: boolean;
}

export interface LocalRoute {
  /** `GET /config.json`, or `$default` for the catch-all route. */
  readonly routeKey: string;
  /** `NONE`, `JWT`, `AWS_IAM` or `CUSTOM`. */
  readonly authorizationType: string;
  /** The binary of the function the route's integration invokes. */
  readonly function: string;
}

/**
 * The HTTP API as the local gateway stand-in must reproduce it: the `$default` stage's throttle
 * (a token bucket: `rateLimit` requests a second, `burstLimit` at once; API Gateway answers 429
 * beyond it) and every route with its authorization and target function.
 */
export interface LocalHttpApi {
  readonly throttle: { readonly rateLimit: number; readonly burstLimit: number } | null;
  readonly routes: LocalRoute[];
}

/**
 * The user pool (authMode=cognito) as the local pool must reproduce it: what sign-in asks of a
 * person (MFA, the password policy) and how people are known (by email, case-insensitively).
 */
export interface LocalUserPool {
  /** `OFF`, `OPTIONAL` or `ON` (CloudFormation's `MfaConfiguration`). */
  readonly mfaConfiguration: string;
  /** `SOFTWARE_TOKEN_MFA`, `SMS_MFA`. */
  readonly enabledMfas: string[];
  /** Sign-in by these attributes (`email`), or by user name when empty. */
  readonly usernameAttributes: string[];
  readonly caseSensitive: boolean;
  readonly allowAdminCreateUserOnly: boolean;
  readonly passwordPolicy: {
    readonly minimumLength: number;
    readonly requireLowercase: boolean;
    readonly requireUppercase: boolean;
    readonly requireNumbers: boolean;
    readonly requireSymbols: boolean;
  };
}

/**
 * A channel namespace of the Event API (the pokes) as the local stand-in runs it: its name, its
 * handlers' code (APPSYNC_JS, run under Node locally) and the table its onSubscribe data source
 * reads (by logical id, and the environment variable that names it to the functions).
 */
export interface LocalChannelNamespace {
  readonly name: string;
  readonly code: string | null;
  readonly subscribeTable: { readonly logicalId: string; readonly env: string | null } | null;
}

export interface LocalResources {
  readonly format: number;
  /** The Event API's channel namespaces (none in a template without one). */
  readonly channelNamespaces: LocalChannelNamespace[];
  /** The user pool, in a template with one (authMode=cognito). */
  readonly userPool: LocalUserPool | null;
  readonly tables: LocalTable[];
  readonly buckets: LocalBucket[];
  readonly queues: LocalQueue[];
  readonly functions: LocalFunction[];
  readonly streamConsumers: LocalStreamConsumer[];
  readonly queueConsumers: LocalQueueConsumer[];
  /**
   * The HTTP API's routes without an authorizer, as route keys (`GET /config.json`), sorted: the
   * requests the local authorizer stand-in must let through without a token, and no others.
   */
  readonly openRoutes: string[];
  /** The HTTP API: stage throttle and routes (null in a template without one). */
  readonly httpApi: LocalHttpApi | null;
}

// biome-ignore lint/suspicious/noExplicitAny: a synthesized template is untyped JSON, walked by key.
type Json = Record<string, any>;

/**
 * Context the local stack is described with: a developer's browser page on 127.0.0.1 PUTs to
 * the emulator's presigned URLs (another origin), so the local bucket allows any origin. A
 * deployment allows none unless configured (docs/deploy.md).
 */
export const LOCAL_STACK_CONTEXT = { corsAllowedOrigins: '*' } as const;

export function describeLocalResourcesOfStack(stack: Stack): LocalResources {
  return describeLocalResources(Template.fromStack(stack).toJSON());
}

/** Describes the resources of a synthesized template (the JSON of `cdk synth`). */
export function describeLocalResources(template: Json): LocalResources {
  const resources: Record<string, Json> = template.Resources ?? {};
  const ofType = (type: string) =>
    Object.entries(resources)
      .filter(([, r]) => r.Type === type)
      .sort(([a], [b]) => a.localeCompare(b));

  // Function logical id -> binary name, and resource logical id -> env var naming it.
  const binaryOf = new Map<string, string>();
  const envOf = new Map<string, string>();
  const functions: LocalFunction[] = [];
  for (const [id, fn] of ofType('AWS::Lambda::Function')) {
    const binary = tagValue(fn.Properties?.Tags, BINARY_TAG);
    if (binary === undefined) continue; // not one of ours (a CDK custom-resource provider)
    binaryOf.set(id, binary);
    const environment: Record<string, LocalEnvValue> = {};
    const variables: Json = fn.Properties?.Environment?.Variables ?? {};
    for (const name of Object.keys(variables).sort()) {
      const value = envValue(variables[name]);
      environment[name] = value;
      if (typeof value === 'object' && 'ref' in value && !envOf.has(value.ref)) envOf.set(value.ref, name);
    }
    functions.push({
      binary,
      timeoutSecs: fn.Properties?.Timeout ?? 3,
      memoryMb: fn.Properties?.MemorySize ?? 128,
      environment,
    });
  }
  functions.sort((a, b) => a.binary.localeCompare(b.binary));

  const tables: LocalTable[] = ofType('AWS::DynamoDB::Table').map(([id, t]) => {
    const p = t.Properties ?? {};
    const types = new Map<string, string>(
      (p.AttributeDefinitions ?? []).map((a: Json) => [a.AttributeName, a.AttributeType]),
    );
    const key = (keyType: string, schema: Json[] = p.KeySchema ?? []): KeyAttribute | null => {
      const k = schema.find((s: Json) => s.KeyType === keyType);
      return k ? { name: k.AttributeName, type: types.get(k.AttributeName) ?? '?' } : null;
    };
    const partitionKey = key('HASH');
    if (partitionKey === null) throw new Error(`table ${id} has no partition key`);
    const indexes: LocalIndex[] = (p.GlobalSecondaryIndexes ?? []).map((g: Json) => {
      const indexKey = key('HASH', g.KeySchema ?? []);
      if (indexKey === null) throw new Error(`index ${g.IndexName} of table ${id} has no partition key`);
      return {
        name: g.IndexName,
        partitionKey: indexKey,
        sortKey: key('RANGE', g.KeySchema ?? []),
        projection: g.Projection?.ProjectionType ?? 'KEYS_ONLY',
      };
    });
    return {
      ...(indexes.length > 0 ? { globalSecondaryIndexes: indexes } : {}),
      logicalId: id,
      env: envOf.get(id) ?? null,
      partitionKey,
      sortKey: key('RANGE'),
      billingMode: p.BillingMode ?? 'PROVISIONED',
      streamViewType: p.StreamSpecification?.StreamViewType ?? null,
      ttlAttribute: p.TimeToLiveSpecification?.Enabled ? p.TimeToLiveSpecification.AttributeName : null,
    };
  });

  const buckets: LocalBucket[] = ofType('AWS::S3::Bucket').map(([id, b]) => {
    const p = b.Properties ?? {};
    return {
      logicalId: id,
      env: envOf.get(id) ?? null,
      versioned: p.VersioningConfiguration?.Status === 'Enabled',
      lifecycleRules: (p.LifecycleConfiguration?.Rules ?? []).map(
        (r: Json): LocalLifecycleRule => ({
          id: r.Id ?? null,
          enabled: r.Status === 'Enabled',
          prefix: r.Prefix ?? null,
          tags: Object.fromEntries((r.TagFilters ?? []).map((f: Json) => [f.Key, f.Value])),
          expirationDays: r.ExpirationInDays ?? null,
          abortIncompleteMultipartUploadDays: r.AbortIncompleteMultipartUpload?.DaysAfterInitiation ?? null,
          noncurrentVersionDays: r.NoncurrentVersionExpiration?.NoncurrentDays ?? null,
          expiredObjectDeleteMarker: r.ExpiredObjectDeleteMarker === true,
        }),
      ),
      // An origin that is not a string is the deployed API's own (the web page's origin, known
      // only once deployed). Locally the page is served by the local API, which the local
      // stack's `*` covers, so rules with only such origins are left out.
      cors: (p.CorsConfiguration?.CorsRules ?? [])
        .map(
          (r: Json): LocalCorsRule => ({
            allowedMethods: r.AllowedMethods ?? [],
            allowedOrigins: (r.AllowedOrigins ?? []).filter((o: unknown) => typeof o === 'string'),
            allowedHeaders: r.AllowedHeaders ?? [],
            exposedHeaders: r.ExposedHeaders ?? [],
            maxAgeSeconds: r.MaxAge ?? null,
          }),
        )
        .filter((r: LocalCorsRule) => r.allowedOrigins.length > 0),
    };
  });

  const queues: LocalQueue[] = ofType('AWS::SQS::Queue').map(([id, q]) => {
    const p = q.Properties ?? {};
    const redrive = p.RedrivePolicy;
    return {
      logicalId: id,
      env: envOf.get(id) ?? null,
      fifo: p.FifoQueue === true,
      // SQS defaults, for attributes left unset in the template.
      visibilityTimeoutSecs: p.VisibilityTimeout ?? 30,
      messageRetentionSecs: p.MessageRetentionPeriod ?? 345_600,
      deadLetter: redrive
        ? { logicalId: getAttTarget(redrive.deadLetterTargetArn, id), maxReceiveCount: Number(redrive.maxReceiveCount) }
        : null,
    };
  });

  const streamConsumers: LocalStreamConsumer[] = [];
  const queueConsumers: LocalQueueConsumer[] = [];
  for (const [id, m] of ofType('AWS::Lambda::EventSourceMapping')) {
    const p = m.Properties ?? {};
    const fnId = p.FunctionName?.Ref;
    const fn = binaryOf.get(fnId);
    if (fn === undefined)
      throw new Error(`event-source mapping ${id} targets ${JSON.stringify(p.FunctionName)}, not one of our functions`);
    const source = p.EventSourceArn?.['Fn::GetAtt'];
    const reportBatchItemFailures = (p.FunctionResponseTypes ?? []).includes('ReportBatchItemFailures');
    if (Array.isArray(source) && source[1] === 'StreamArn') {
      streamConsumers.push({
        function: fn,
        table: source[0],
        startingPosition: p.StartingPosition,
        batchSize: p.BatchSize ?? null,
        filterPatterns: (p.FilterCriteria?.Filters ?? []).map((f: Json) => JSON.parse(f.Pattern)),
        reportBatchItemFailures,
        maximumRetryAttempts: p.MaximumRetryAttempts ?? null,
        onFailureQueue: p.DestinationConfig?.OnFailure?.Destination
          ? getAttTarget(p.DestinationConfig.OnFailure.Destination, id)
          : null,
      });
    } else if (Array.isArray(source) && source[1] === 'Arn' && resources[source[0]]?.Type === 'AWS::SQS::Queue') {
      queueConsumers.push({ function: fn, queue: source[0], batchSize: p.BatchSize ?? null, reportBatchItemFailures });
    } else {
      throw new Error(`event-source mapping ${id}: unsupported source ${JSON.stringify(p.EventSourceArn)}`);
    }
  }

  const openRoutes = ofType('AWS::ApiGatewayV2::Route')
    .map(([, r]) => r.Properties ?? {})
    .filter((p) => p.AuthorizationType === 'NONE')
    .map((p) => String(p.RouteKey))
    .sort();

  return {
    format: LOCAL_RESOURCES_FORMAT,
    httpApi: describeHttpApi(resources, binaryOf),
    userPool: describeUserPool(resources),
    channelNamespaces: describeChannelNamespaces(resources, envOf),
    tables,
    buckets,
    queues,
    functions,
    streamConsumers,
    queueConsumers,
    openRoutes,
  };
}

function describeChannelNamespaces(
  resources: Record<string, Json>,
  envOf: Map<string, string>,
): LocalChannelNamespace[] {
  const sources = new Map<string, Json>(
    Object.values(resources)
      .filter((r) => r.Type === 'AWS::AppSync::DataSource')
      .map((r) => [r.Properties?.Name, r.Properties]),
  );
  return Object.values(resources)
    .filter((r) => r.Type === 'AWS::AppSync::ChannelNamespace')
    .map((r) => {
      const p = r.Properties ?? {};
      const source = sources.get(p.HandlerConfigs?.OnSubscribe?.Integration?.DataSourceName);
      const table = source?.DynamoDBConfig?.TableName?.Ref;
      return {
        name: String(p.Name),
        code: typeof p.CodeHandlers === 'string' ? p.CodeHandlers : null,
        subscribeTable: typeof table === 'string' ? { logicalId: table, env: envOf.get(table) ?? null } : null,
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

function describeUserPool(resources: Record<string, Json>): LocalUserPool | null {
  const pools = Object.values(resources).filter((r) => r.Type === 'AWS::Cognito::UserPool');
  if (pools.length === 0) return null;
  if (pools.length > 1) throw new Error(`the local stack has one user pool; the template has ${pools.length}`);
  const p = pools[0].Properties ?? {};
  const policy = p.Policies?.PasswordPolicy ?? {};
  return {
    mfaConfiguration: p.MfaConfiguration ?? 'OFF',
    enabledMfas: p.EnabledMfas ?? [],
    usernameAttributes: p.UsernameAttributes ?? [],
    caseSensitive: p.UsernameConfiguration?.CaseSensitive ?? true,
    allowAdminCreateUserOnly: p.AdminCreateUserConfig?.AllowAdminCreateUserOnly ?? false,
    passwordPolicy: {
      minimumLength: policy.MinimumLength ?? 8,
      requireLowercase: policy.RequireLowercase ?? false,
      requireUppercase: policy.RequireUppercase ?? false,
      requireNumbers: policy.RequireNumbers ?? false,
      requireSymbols: policy.RequireSymbols ?? false,
    },
  };
}

function describeHttpApi(resources: Record<string, Json>, binaryOf: Map<string, string>): LocalHttpApi | null {
  const apis = Object.entries(resources).filter(([, r]) => r.Type === 'AWS::ApiGatewayV2::Api');
  if (apis.length === 0) return null;
  if (apis.length > 1) throw new Error(`the local stack serves one HTTP API; the template has ${apis.length}`);
  const stages = Object.values(resources).filter((r) => r.Type === 'AWS::ApiGatewayV2::Stage');
  const stage = stages.find((s) => s.Properties?.StageName === '$default') ?? stages[0];
  const settings = stage?.Properties?.DefaultRouteSettings ?? {};
  const throttle =
    settings.ThrottlingRateLimit === undefined && settings.ThrottlingBurstLimit === undefined
      ? null
      : { rateLimit: Number(settings.ThrottlingRateLimit), burstLimit: Number(settings.ThrottlingBurstLimit) };
  const routes: LocalRoute[] = Object.entries(resources)
    .filter(([, r]) => r.Type === 'AWS::ApiGatewayV2::Route')
    .map(([id, r]) => {
      const p = r.Properties ?? {};
      // Target is {"Fn::Join": ["", ["integrations/", {"Ref": <integration>}]]}.
      const parts = p.Target?.['Fn::Join']?.[1];
      const integrationId = Array.isArray(parts) ? parts.find((x: Json) => typeof x?.Ref === 'string')?.Ref : undefined;
      const uri = resources[integrationId ?? '']?.Properties?.IntegrationUri;
      const fn = binaryOf.get(getAttTarget(uri, `route ${id}`));
      if (fn === undefined) throw new Error(`route ${id} (${p.RouteKey}) does not invoke one of our functions`);
      return { routeKey: String(p.RouteKey), authorizationType: String(p.AuthorizationType ?? 'NONE'), function: fn };
    })
    .sort((a, b) => a.routeKey.localeCompare(b.routeKey));
  return { throttle, routes };
}

function tagValue(tags: unknown, key: string): string | undefined {
  if (Array.isArray(tags)) return tags.find((t: Json) => t.Key === key)?.Value;
  return undefined;
}

function envValue(value: unknown): LocalEnvValue {
  if (typeof value === 'string') return value;
  if (value !== null && typeof value === 'object' && typeof (value as Json).Ref === 'string') {
    return { ref: (value as Json).Ref };
  }
  return { cfn: value };
}

function getAttTarget(value: Json, where: string): string {
  const att = value?.['Fn::GetAtt'];
  if (Array.isArray(att) && att[1] === 'Arn') return att[0];
  throw new Error(`${where}: expected {"Fn::GetAtt": [<id>, "Arn"]}, got ${JSON.stringify(value)}`);
}

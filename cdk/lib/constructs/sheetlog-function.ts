/**
 * The house Lambda construct: a cargo-lambda `RustFunction` with our defaults (ARM64,
 * `provided.al2023`, JSON logs into a log group with retention, X-Ray tracing, explicit timeout and
 * memory) and `bind*` helpers that set one environment variable and grant exactly the access that
 * variable implies, in the same call — so a function can never learn a resource's name without the
 * permission to use it, nor hold a permission it has no name for.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type CfnElement, type Duration, RemovalPolicy, type Size, Stack, Tags, Validations } from 'aws-cdk-lib';
import type * as cognito from 'aws-cdk-lib/aws-cognito';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { RustFunction } from 'cargo-lambda-cdk';
import { Construct } from 'constructs';
import { SetupError } from '../errors';
import { ensureCargoLambda } from '../toolchain';

/** One function crate: `functions/<dir>/Cargo.toml`, whose package and binary are both `binaryName`. */
export interface FunctionCrate {
  readonly dir: string;
  readonly binaryName: string;
}

/** The tag that names a function's binary in the template (read back by `resources.ts`). */
export const BINARY_TAG = 'sheetlog:binary';

/**
 * DynamoDB actions a function may hold on a table, each named at the bindTable call of the
 * function whose code makes that call (cdk/test/iam.test.ts compares the template with the
 * allow-list next to each crate). BatchGetItem and ConditionCheckItem only on the catalog (its
 * sheet list reads items in batches; a share checks the sharer's role inside its transaction),
 * Scan only for the retention run, which finds the logs with one. TransactWriteItems needs no
 * action of its own: each item needs the PutItem, UpdateItem, DeleteItem or ConditionCheckItem it does.
 */
export type DynamoAction =
  | 'GetItem'
  | 'BatchGetItem'
  | 'Query'
  | 'Scan'
  | 'PutItem'
  | 'UpdateItem'
  | 'DeleteItem'
  | 'BatchWriteItem'
  | 'ConditionCheckItem';

/** What a function may ask of a Cognito user pool: look a person up by email or by user id. */
export type UserPoolAction = 'ListUsers';

/** What a function may do with the objects under one key prefix of a bucket. */
export type ObjectAccess = 'read' | 'write' | 'abortUpload' | 'tag' | 'untag' | 'delete';

const OBJECT_ACTIONS: Record<ObjectAccess, string[]> = {
  // GetObject also authorises HeadObject, and (with PutObject on the target) CopyObject's source.
  read: ['s3:GetObject'],
  // PutObject also authorises a multipart upload's create, parts and completion.
  write: ['s3:PutObject'],
  // Aborting a multipart upload that failed (a large snapshot manifest whose build failed
  // halfway) is an action of its own; the bucket's lifecycle rule removes one left behind.
  abortUpload: ['s3:AbortMultipartUpload'],
  // Writing objects tagged (a PUT or a presigned PUT carrying x-amz-tagging, a CopyObject that
  // replaces the tags) also needs PutObjectTagging: grant `tag` with `write` there.
  tag: ['s3:PutObjectTagging'],
  // Removing one tag and keeping the others: read the tag set, then write back the rest or delete it.
  untag: ['s3:GetObjectTagging', 's3:PutObjectTagging', 's3:DeleteObjectTagging'],
  // Deleting a log (DeleteObjects needs DeleteObject on each key); listing its keys needs the
  // bucket's ListBucket, granted with it below.
  delete: ['s3:DeleteObject'],
};

export interface PrefixGrant {
  /** Key prefix, ending in `/` (for example `payloads/`). */
  readonly prefix: string;
  readonly access: ObjectAccess[];
}

/** `send`: producers. `consume`: a consumer that also re-sends, changes visibility and deletes by itself. */
export type QueueAccess = 'send' | 'consume';

export interface SheetlogFunctionProps {
  readonly crate: FunctionCrate;
  /** Folder holding the function crates (`<functionsDir>/<crate.dir>/Cargo.toml`). */
  readonly functionsDir: string;
  readonly description: string;
  readonly architecture: lambda.Architecture;
  readonly timeout: Duration;
  readonly memorySize: number;
  readonly logRetention: logs.RetentionDays;
  /** `RUST_LOG` filter. */
  readonly logLevel: string;
  /**
   * Lambda's recursive-loop detection (default: terminate a chain after about 16 hops). A
   * function that legitimately re-sends its own work sets `ALLOW` and bounds the chain itself.
   */
  readonly recursiveLoop?: lambda.RecursiveLoop;
  /** `/tmp` size, for functions that spool a file there (Lambda's default: 512 MiB). */
  readonly ephemeralStorageSize?: Size;
  /**
   * Every function crate of the stack. Each function is built with all of them selected
   * (`-p` each), so Cargo resolves one feature set for their dependencies and the second and
   * third builds reuse the first's compiled dependencies instead of rebuilding most of them.
   */
  readonly buildWith?: readonly FunctionCrate[];
  /** Cargo profile; default `release`. */
  readonly cargoProfile?: string;
}

/** The only actions a function role may hold on `Resource: "*"`; none of them supports resource-level permissions. */
export const UNSCOPED_ACTIONS = ['xray:PutTraceSegments', 'xray:PutTelemetryRecords', 'dynamodb:ListStreams'] as const;

/** Environment variables are ours to name: `SHEETLOG_*`, plus `RUST_LOG`. */
const ENV_NAME = /^(SHEETLOG_[A-Z0-9_]+|RUST_LOG)$/;

export class SheetlogFunction extends Construct {
  readonly function: RustFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;
  readonly crate: FunctionCrate;
  private readonly bound = new Map<string, string>();

  constructor(scope: Construct, id: string, props: SheetlogFunctionProps) {
    super(scope, id);
    this.crate = props.crate;

    const manifestPath = path.join(props.functionsDir, props.crate.dir, 'Cargo.toml');
    if (!fs.existsSync(manifestPath)) {
      throw new SetupError(
        `${manifestPath} does not exist: the ${props.crate.binaryName} crate must be in the tree to synthesize the stack`,
      );
    }
    if (Stack.of(this).bundlingRequired) ensureCargoLambda();

    // Logs are diagnostics, not data: they expire with the retention and go with the stack.
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });

    // Our own role instead of AWSLambdaBasicExecutionRole, whose logs:CreateLogGroup and
    // PutLogEvents apply to every log group in the account: this one writes to its own group only.
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.crate.binaryName} execution role`,
    });
    this.logGroup.grantWrite(this.role);

    this.function = new RustFunction(this, 'Function', {
      manifestPath,
      role: this.role,
      binaryName: props.crate.binaryName,
      bundling: {
        cargoLambdaFlags: packageFlags(props.crate, props.buildWith ?? []),
        profile: props.cargoProfile ?? 'release',
      },
      runtime: 'provided.al2023',
      architecture: props.architecture,
      description: props.description,
      timeout: props.timeout,
      memorySize: props.memorySize,
      loggingFormat: lambda.LoggingFormat.JSON,
      logGroup: this.logGroup,
      tracing: lambda.Tracing.ACTIVE,
      recursiveLoop: props.recursiveLoop,
      ephemeralStorageSize: props.ephemeralStorageSize,
    });
    Tags.of(this.function).add(BINARY_TAG, props.crate.binaryName);
    Validations.of(this.role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        `Only actions without resource-level permissions are granted on "*": ${UNSCOPED_ACTIONS.join(', ')} ` +
        '(X-Ray tracing; ListStreams for an Entry-stream consumer). cdk/test/nag.test.ts fails on any other action on "*".',
    });
    this.bindSetting('RUST_LOG', props.logLevel);
  }

  /** Sets a plain setting (no resource behind it). */
  bindSetting(name: string, value: string | number): this {
    this.setEnv(name, String(value));
    return this;
  }

  /** Sets `name` to the table's name and grants exactly `actions` on that table only. */
  bindTable(
    name: string,
    table: dynamodb.ITable,
    actions: readonly DynamoAction[],
    /**
     * For a table with indexes: the actions on its indexes (`<table>/index/*`), usually just
     * `Query`; `[]` for none. Without it, a table with indexes would get every action on them too.
     */
    indexActions?: readonly DynamoAction[],
  ): this {
    if (actions.length === 0) throw new Error(`bindTable ${name}: no actions`);
    this.setEnv(name, table.tableName);
    const iamActions = (list: readonly DynamoAction[]) => [...new Set(list)].sort().map((a) => `dynamodb:${a}`);
    if (indexActions === undefined) {
      table.grant(this.function, ...iamActions(actions));
    } else {
      this.function.addToRolePolicy(
        new iam.PolicyStatement({ actions: iamActions(actions), resources: [table.tableArn] }),
      );
      if (indexActions.length > 0)
        this.function.addToRolePolicy(
          new iam.PolicyStatement({ actions: iamActions(indexActions), resources: [`${table.tableArn}/index/*`] }),
        );
    }
    return this;
  }

  /** Sets `name` to the user pool's id and grants exactly `actions` on that pool only. */
  bindUserPool(name: string, pool: cognito.IUserPool, actions: readonly UserPoolAction[]): this {
    if (actions.length === 0) throw new Error(`bindUserPool ${name}: no actions`);
    this.setEnv(name, pool.userPoolId);
    pool.grant(this.function, ...[...new Set(actions)].sort().map((a) => `cognito-idp:${a}`));
    return this;
  }

  /** Sets `name` to the bucket's name and grants each access on its prefix only. */
  bindBucket(name: string, bucket: s3.IBucket, grants: PrefixGrant[]): this {
    this.setEnv(name, bucket.bucketName);
    for (const { prefix, access } of grants) {
      if (!/^[a-z0-9-]+\/$/.test(prefix))
        throw new Error(`bucket prefix ${JSON.stringify(prefix)} must look like "name/"`);
      const actions = [...new Set(access.flatMap((a) => OBJECT_ACTIONS[a]))].sort();
      this.function.addToRolePolicy(
        new iam.PolicyStatement({ actions, resources: [bucket.arnForObjects(`${prefix}*`)] }),
      );
      const bucketLogicalId: string = Stack.of(this).resolve((bucket.node.defaultChild as CfnElement).logicalId);
      Validations.of(this.role).acknowledge({
        id: `AwsSolutions-IAM5[Resource::<${bucketLogicalId}.Arn>/${prefix}*]`,
        reason: `Object keys under ${prefix} are chosen at run time (UUIDs, content hashes); the wildcard stops at the prefix.`,
      });
    }
    if (grants.some((g) => g.access.includes('read') || g.access.includes('untag') || g.access.includes('delete'))) {
      // Without ListBucket, S3 answers a GET, HEAD or tagging call on a missing key with 403
      // instead of 404, and "not there yet" (a chunk to upload, an upload not finished, a payload
      // already expired) becomes indistinguishable from "not allowed", which is retried until the
      // record lands in a dead-letter queue. It reveals key names only: UUIDs and content hashes.
      this.function.addToRolePolicy(
        new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: [bucket.bucketArn] }),
      );
    }
    return this;
  }

  /** Sets `name` to the queue's URL and grants sending, or the consumer's own visibility and delete calls. */
  bindQueue(name: string, queue: sqs.IQueue, access: QueueAccess): this {
    this.setEnv(name, queue.queueUrl);
    if (access === 'send') {
      // SendMessageBatch is authorised by sqs:SendMessage; grantSendMessages would add
      // GetQueueAttributes and GetQueueUrl, which no code calls (the URL comes from the environment).
      queue.grant(this.function, 'sqs:SendMessage');
    } else {
      // Receiving is granted by the event-source mapping. The worker defers or hands off a job
      // by sending a fresh copy with a delivery delay (SendMessage), so waiting never counts
      // towards the redrive threshold; it falls back to ChangeMessageVisibility when the send
      // fails, and may delete a finished message itself (DeleteMessage).
      queue.grant(this.function, 'sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:SendMessage');
    }
    return this;
  }

  /** The environment variables set so far, by name (values may be tokens). */
  get environment(): ReadonlyMap<string, string> {
    return this.bound;
  }

  private setEnv(name: string, value: string): void {
    if (!ENV_NAME.test(name))
      throw new Error(`environment variable ${name}: CDK-owned names are SHEETLOG_* or RUST_LOG`);
    if (this.bound.has(name))
      throw new Error(`environment variable ${name} is bound twice on ${this.crate.binaryName}`);
    this.bound.set(name, value);
    this.function.addEnvironment(name, value);
  }
}

/** `-p <crate>` for the function's own crate and every crate it is built with, each once. */
export function packageFlags(own: FunctionCrate, buildWith: readonly FunctionCrate[]): string[] {
  const names = [...new Set([own.binaryName, ...buildWith.map((c) => c.binaryName)])].sort();
  return names.length > 1 ? names.flatMap((n) => ['-p', n]) : [];
}

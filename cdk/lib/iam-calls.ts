/**
 * Holds the AWS calls the functions really made against the roles the template gives them.
 *
 * Locally each function signs its calls with a key of its own (`role:<binary>:<stack>`,
 * `functions/pipeline/src/roles.rs`), and the emulator's recorder (`scripts/lib/iam_recorder.py`)
 * writes down the IAM action and resource each call needs; `sheetlog dev` adds one line per stack
 * saying which local resource stands for each of the template's. This module turns the role
 * policies of the synthesized template into the local stack's ARNs and evaluates every recorded
 * call with an IAM policy simulator (`@cloud-copilot/iam-simulate`: the policy language, wildcards,
 * conditions, and a check that the action exists and takes that resource type), so a call a role
 * lacks fails here, with the statement it would need, instead of with AccessDenied in a
 * customer's account. Run by `cdk/bin/iam-calls.ts` at the end of `./scripts/test`.
 */
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { BINARY_TAG } from './constructs/sheetlog-function';

// biome-ignore lint/suspicious/noExplicitAny: CloudFormation JSON
export type Json = any;

/** The emulator's account and region (moto's defaults; the local stack uses us-east-1). */
export const LOCAL_ACCOUNT = '123456789012';
export const LOCAL_REGION = 'us-east-1';
/** The local Event API's id (`LOCAL_EVENT_API_ID` in roles.rs). */
export const LOCAL_EVENT_API_ID = 'local';
/** What a function's local access key id starts with (`ROLE_KEY_PREFIX` in roles.rs). */
export const ROLE_KEY_PREFIX = 'role:';

/** Which local resource stands for each of the template's (`Counterparts` in roles.rs). */
export interface Counterparts {
  tables: Record<string, string>;
  buckets: Record<string, string>;
  /** Logical id → queue URL. */
  queues: Record<string, string>;
  userPool?: string | null;
}

export interface StackLine {
  kind: 'stack';
  /** The stack's name in its role keys. */
  stack: string;
  /** `KEY=VALUE` settings the template was described with. */
  context: string[];
  counterparts: Counterparts;
}

export interface CallLine {
  kind: 'call';
  key: string;
  action: string;
  resource: string;
  call: string;
}

export type RecordLine = StackLine | CallLine;

export function parseRecord(text: string): RecordLine[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, i) => {
      try {
        return JSON.parse(l) as RecordLine;
      } catch {
        throw new Error(`line ${i + 1} of the IAM record is not JSON: ${l.slice(0, 200)}`);
      }
    });
}

/** The context a stack line was described with, as an object for `buildApp`. */
export function contextOf(line: StackLine): Record<string, string> {
  return Object.fromEntries(
    line.context.map((kv) => {
      const eq = kv.indexOf('=');
      return [kv.slice(0, eq), kv.slice(eq + 1)];
    }),
  );
}

function unresolved(what: unknown): string {
  // Matches no ARN a call names, so a grant on a resource the local stack lacks allows nothing.
  return `arn:aws:unresolved:::${JSON.stringify(what).replace(/[*?]/g, '_')}`;
}

/**
 * A CloudFormation expression of a policy's Resource, with the template's resources replaced by
 * their local counterparts and the pseudo parameters by the emulator's.
 */
export function resolveExpression(template: Json, pairs: Counterparts, expr: unknown): string {
  const resources = template.Resources as Record<string, Json>;
  const typeOf = (id: string): string | undefined => resources[id]?.Type;
  if (typeof expr === 'string') return expr;
  const e = expr as Json;
  if (e.Ref !== undefined) {
    switch (e.Ref) {
      case 'AWS::Partition':
        return 'aws';
      case 'AWS::Region':
        return LOCAL_REGION;
      case 'AWS::AccountId':
        return LOCAL_ACCOUNT;
      case 'AWS::URLSuffix':
        return 'amazonaws.com';
    }
    const id = e.Ref as string;
    return pairs.tables[id] ?? pairs.buckets[id] ?? pairs.queues[id] ?? unresolved(e);
  }
  if (e['Fn::GetAtt'] !== undefined) {
    const [id, attr] = e['Fn::GetAtt'] as [string, string];
    const type = typeOf(id);
    if (type === 'AWS::DynamoDB::Table' && pairs.tables[id]) {
      const arn = `arn:aws:dynamodb:${LOCAL_REGION}:${LOCAL_ACCOUNT}:table/${pairs.tables[id]}`;
      // The table's one stream, whatever label the emulator gave it.
      if (attr === 'StreamArn') return `${arn}/stream/*`;
      if (attr === 'Arn') return arn;
    }
    if (type === 'AWS::SQS::Queue' && pairs.queues[id] && attr === 'Arn') {
      const name = pairs.queues[id].replace(/\/$/, '').split('/').pop();
      return `arn:aws:sqs:${LOCAL_REGION}:${LOCAL_ACCOUNT}:${name}`;
    }
    if (type === 'AWS::S3::Bucket' && pairs.buckets[id] && attr === 'Arn') return `arn:aws:s3:::${pairs.buckets[id]}`;
    if (type === 'AWS::Cognito::UserPool' && pairs.userPool && attr === 'Arn') {
      return `arn:aws:cognito-idp:${LOCAL_REGION}:${LOCAL_ACCOUNT}:userpool/${pairs.userPool}`;
    }
    if (type === 'AWS::AppSync::Api' && attr === 'ApiId') return LOCAL_EVENT_API_ID;
    return unresolved(e);
  }
  if (e['Fn::Join'] !== undefined) {
    const [sep, parts] = e['Fn::Join'] as [string, unknown[]];
    return parts.map((p) => resolveExpression(template, pairs, p)).join(sep);
  }
  return unresolved(e);
}

/** A function of ours, found by its `sheetlog:binary` tag: [logical id, resource]. */
export function functionOf(template: Json, binary: string): [string, Json] | undefined {
  return Object.entries(template.Resources as Record<string, Json>).find(
    ([, r]) =>
      r.Type === 'AWS::Lambda::Function' &&
      (r.Properties.Tags ?? []).some((t: Json) => t.Key === BINARY_TAG && t.Value === binary),
  );
}

/** The statements of every policy on the function's execution role, as the template has them. */
export function roleStatements(template: Json, binary: string): Json[] {
  const found = functionOf(template, binary);
  if (!found) throw new Error(`the template has no function ${binary}`);
  const roleId = found[1].Properties.Role['Fn::GetAtt'][0];
  const role = template.Resources[roleId];
  if ((role.Properties.ManagedPolicyArns ?? []).length > 0) {
    throw new Error(`${binary}'s role has managed policies, which this check cannot read`);
  }
  const inline = (role.Properties.Policies ?? []).flatMap((p: Json) => p.PolicyDocument.Statement);
  const attached = Object.values(template.Resources as Record<string, Json>)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && r.Properties.Roles.some((x: Json) => x.Ref === roleId))
    .flatMap((r) => r.Properties.PolicyDocument.Statement);
  return [...inline, ...attached];
}

/** A readable key for a statement's resource: a logical id, `<id>/prefix*`, or a literal (the
 * allow-lists' keys, `functions/<crate>/iam-allow-list.json`). */
export function resourceKey(resource: unknown): string {
  if (typeof resource === 'string') return resource;
  const r = resource as Json;
  if (r.Ref) return r.Ref;
  if (r['Fn::GetAtt']) return r['Fn::GetAtt'][1] === 'Arn' ? r['Fn::GetAtt'][0] : r['Fn::GetAtt'].join('.');
  if (r['Fn::Join']) return r['Fn::Join'][1].map(resourceKey).join('');
  return JSON.stringify(r);
}

/** The role's statements with every Resource in the local stack's ARNs. */
export function localPolicy(template: Json, binary: string, pairs: Counterparts): Json {
  const statements = roleStatements(template, binary).map((s) => {
    const list = (v: unknown) => (Array.isArray(v) ? v : [v]);
    const out: Json = { ...s };
    if (s.Resource !== undefined) out.Resource = list(s.Resource).map((r) => resolveExpression(template, pairs, r));
    if (s.NotResource !== undefined) {
      out.NotResource = list(s.NotResource).map((r) => resolveExpression(template, pairs, r));
    }
    return out;
  });
  return { Version: '2012-10-17', Statement: statements };
}

export interface Verdict {
  binary: string;
  stack: string;
  action: string;
  resource: string;
  call: string;
  allowed: boolean;
  /** Why not: the simulator's decision or its validation error. */
  reason?: string;
}

/** `role:<binary>:<stack>` → [binary, stack]. */
export function parseRoleKey(key: string): [string, string] | undefined {
  if (!key.startsWith(ROLE_KEY_PREFIX)) return undefined;
  const rest = key.slice(ROLE_KEY_PREFIX.length);
  const colon = rest.indexOf(':');
  return colon > 0 ? [rest.slice(0, colon), rest.slice(colon + 1)] : undefined;
}

/** Evaluates one call against a policy, as IAM would for the role's identity. */
export async function evaluate(policy: Json, binary: string, action: string, resource: string): Promise<string | null> {
  const result = await runSimulation(
    {
      identityPolicies: [{ name: `${binary}-role`, policy }],
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      request: {
        principal: `arn:aws:iam::${LOCAL_ACCOUNT}:role/${binary}`,
        action,
        resource: { resource, accountId: LOCAL_ACCOUNT },
        contextVariables: {},
      },
      // biome-ignore lint/suspicious/noExplicitAny: the simulator's input type names optional parts as required
    } as any,
    {},
  );
  if (result.resultType === 'error') return `the simulator refused the request: ${JSON.stringify(result.errors)}`;
  if (result.resultType === 'single') return result.overallResult === 'Allowed' ? null : result.overallResult;
  return `unexpected simulation result ${result.resultType}`;
}

/** Templates by context (JSON of the context object), each synthesized once. */
export type TemplateFor = (context: Record<string, string>) => Json;

/** Every recorded call of a role, evaluated against that role's policy in its stack's template. */
export async function evaluateRecord(lines: RecordLine[], templateFor: TemplateFor): Promise<Verdict[]> {
  const stacks = new Map<string, StackLine>();
  for (const l of lines) if (l.kind === 'stack') stacks.set(l.stack, l);
  const policies = new Map<string, Json>();
  const verdicts: Verdict[] = [];
  for (const l of lines) {
    if (l.kind !== 'call') continue;
    const role = parseRoleKey(l.key);
    const [binary, stackName] = role ?? ['?', '?'];
    const base = { binary, stack: stackName, action: l.action, resource: l.resource, call: l.call };
    const stack = stacks.get(stackName);
    if (!role || !stack) {
      verdicts.push({ ...base, allowed: false, reason: `no stack line for key ${l.key} in the record` });
      continue;
    }
    const policyKey = `${stackName}\n${binary}`;
    let policy = policies.get(policyKey);
    if (policy === undefined) {
      try {
        policy = localPolicy(templateFor(contextOf(stack)), binary, stack.counterparts);
      } catch (err) {
        // A function this stack's template lacks (say, the archiver of a stack described
        // without retentionMode): no role allows its calls.
        policy = null;
        verdicts.push({ ...base, allowed: false, reason: (err as Error).message });
      }
      policies.set(policyKey, policy);
      if (policy === null) continue;
    } else if (policy === null) {
      verdicts.push({
        ...base,
        allowed: false,
        reason: `the template of stack ${stackName} has no function ${binary}`,
      });
      continue;
    }
    const reason = await evaluate(policy, binary, l.action, l.resource);
    verdicts.push(reason === null ? { ...base, allowed: true } : { ...base, allowed: false, reason });
  }
  return verdicts;
}

/** A local resource name put back as the template's logical id (`<EntryTable>`), for a
 * readable statement. */
export function inTemplateTerms(resource: string, pairs: Counterparts | undefined): string {
  if (!pairs) return resource;
  const names: [string, string][] = [
    ...Object.entries(pairs.tables),
    ...Object.entries(pairs.buckets),
    ...Object.entries(pairs.queues).map(([id, url]): [string, string] => [id, url.split('/').pop() ?? url]),
  ];
  // Longest names first: `p-sync-dlq.fifo` before `p-sync.fifo`.
  names.sort(([, a], [, b]) => b.length - a.length);
  let out = resource;
  for (const [id, name] of names) out = out.split(name).join(`<${id}>`);
  return out;
}

/** What the check says about a call the role does not allow: the action, the resource, the
 * call that needed it and the statement that would allow it. */
export function describeDenial(v: Verdict, pairs: Counterparts | undefined): string {
  const statement = { Effect: 'Allow', Action: v.action, Resource: inTemplateTerms(v.resource, pairs) };
  return (
    `NOT ALLOWED  ${v.binary}: ${v.action} on ${v.resource} (${v.call}): ${v.reason}\n` +
    `             needs a statement like ${JSON.stringify(statement)}`
  );
}

/** One (resource, action) the role holds: its allow-list key and its local ARN pattern. */
export interface Grant {
  key: string;
  action: string;
  pattern: string;
}

/** Every (resource, action) the role holds, keyed as the allow-lists are. */
export function grantsOf(template: Json, binary: string, pairs: Counterparts): Grant[] {
  const found = functionOf(template, binary);
  const ownLogs = found?.[1].Properties.LoggingConfig?.LogGroup?.Ref;
  const list = (v: unknown) => (Array.isArray(v) ? v : [v]);
  const out: Grant[] = [];
  for (const s of roleStatements(template, binary)) {
    if (s.Effect !== 'Allow' || s.Resource === undefined) continue;
    for (const r of list(s.Resource)) {
      const key = resourceKey(r) === ownLogs ? '<own log group>' : resourceKey(r);
      const pattern = resolveExpression(template, pairs, r);
      for (const action of list(s.Action) as string[]) out.push({ key, action, pattern });
    }
  }
  return out;
}

/** IAM's ARN matching: `*` any run of characters, `?` one. */
export function arnMatches(pattern: string, arn: string): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`).test(arn);
}

/** The grants some allowed call used, and those none did. */
export function coverage(grants: Grant[], verdicts: Verdict[]): { used: Grant[]; unused: Grant[] } {
  const allowed = verdicts.filter((v) => v.allowed);
  const used: Grant[] = [];
  const unused: Grant[] = [];
  const seen = new Set<string>();
  for (const g of grants) {
    const id = `${g.key}\n${g.action}`;
    if (seen.has(id)) continue;
    seen.add(id);
    const hit = allowed.some((v) => v.action === g.action && arnMatches(g.pattern, v.resource));
    (hit ? used : unused).push(g);
  }
  return { used, unused };
}

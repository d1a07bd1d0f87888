/**
 * Shared test helpers: synthesize the stack with bundling skipped (stub crates, no Rust build) and
 * find resources by what they are (type, tag, property), never by hashed logical id.
 */
import * as assert from 'node:assert/strict';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { BINARY_TAG } from '../lib/constructs/sheetlog-function';
import { resourceKey, roleStatements } from '../lib/iam-calls';
import { buildApp, type SheetlogApp } from '../lib/sheetlog-app';

// biome-ignore lint/suspicious/noExplicitAny: a synthesized template is untyped JSON, walked by key.
export type Json = Record<string, any>;

export interface Synth extends SheetlogApp {
  readonly template: Template;
  readonly json: Json;
}

const cache = new Map<string, Synth>();

/** Synthesizes the app with the given extra context (memoized per context within a test file). */
export function synth(context: Record<string, unknown> = {}): Synth {
  const key = JSON.stringify(context);
  let result = cache.get(key);
  if (result === undefined) {
    // No settings file: the tests' configuration is only what they pass.
    const built = buildApp({ skipBundling: true, nag: false, context, configFile: null });
    const template = Template.fromStack(built.stack);
    result = { ...built, template, json: template.toJSON() };
    cache.set(key, result);
  }
  return result;
}

export function resourcesOfType(json: Json, type: string): [string, Json][] {
  return Object.entries(json.Resources as Record<string, Json>).filter(([, r]) => r.Type === type);
}

/** The one resource of `type` whose properties satisfy `predicate`. */
export function onlyResource(json: Json, type: string, predicate: (r: Json) => boolean = () => true): [string, Json] {
  const found = resourcesOfType(json, type).filter(([, r]) => predicate(r));
  assert.equal(
    found.length,
    1,
    `expected exactly one ${type} matching, found ${found.map(([id]) => id).join(', ') || 'none'}`,
  );
  return found[0];
}

/** A function of ours, found by its `sheetlog:binary` tag. */
export function functionByBinary(json: Json, binary: string): [string, Json] {
  return onlyResource(json, 'AWS::Lambda::Function', (r) =>
    (r.Properties.Tags ?? []).some((t: Json) => t.Key === BINARY_TAG && t.Value === binary),
  );
}

export { resourceKey, roleStatements };

/** Actions the role holds, as "resource -> sorted actions" (Allow statements only). */
export function grantsByResource(json: Json, binary: string): Record<string, string[]> {
  const grants: Record<string, Set<string>> = {};
  for (const s of roleStatements(json, binary)) {
    assert.equal(s.Effect, 'Allow');
    assert.equal(s.Condition, undefined, 'conditions are not expected on function roles');
    const actions: string[] = Array.isArray(s.Action) ? s.Action : [s.Action];
    const resources: unknown[] = Array.isArray(s.Resource) ? s.Resource : [s.Resource];
    for (const r of resources) {
      const key = resourceKey(r);
      grants[key] ??= new Set();
      for (const a of actions) grants[key].add(a);
    }
  }
  return Object.fromEntries(Object.entries(grants).map(([k, v]) => [k, [...v].sort()]));
}

/**
 * Asserts a DynamoDB table with this key schema is kept like the stack's data: on-demand,
 * point-in-time recovery, encrypted, deletion-protected and retained on delete and replace.
 */
export function assertKeptTable(template: Template, keySchema: unknown): void {
  template.hasResource('AWS::DynamoDB::Table', {
    Properties: Match.objectLike({
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      SSESpecification: { SSEEnabled: true },
      DeletionProtectionEnabled: true,
      KeySchema: keySchema,
    }),
    DeletionPolicy: 'Retain',
    UpdateReplacePolicy: 'Retain',
  });
}

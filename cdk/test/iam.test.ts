/**
 * Least privilege, checked against the code: each function crate keeps, next to its code
 * (`functions/<crate>/iam-allow-list.json`), the AWS actions its role may hold, by resource, each
 * with the call that needs it. This test derives every role's grants from the synthesized template
 * and requires them to be exactly that list: a grant no call needs fails here, and so does a call
 * added to the allow-list without the stack granting it.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { allowListFiles, FUNCTIONS_DIR, readAllowList } from '../lib/allow-lists';
import type { FunctionCrate } from '../lib/constructs/sheetlog-function';
import { ARCHIVER_CRATE, CRATES } from '../lib/sheetlog-stack';
import { functionByBinary, grantsByResource, type Json, synth } from './support';

function allowList(crate: FunctionCrate): Record<string, string[]> {
  return allowListFile(path.join(FUNCTIONS_DIR, crate.dir, 'iam-allow-list.json'));
}

function allowListFile(file: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [resource, actions] of Object.entries(readAllowList(file).grants)) {
    assert.equal(typeof actions, 'object', `${file}: ${resource}`);
    for (const [action, why] of Object.entries(actions)) {
      assert.ok(typeof why === 'string' && why.length > 0, `${file}: ${resource} ${action} says why`);
    }
    out[resource] = Object.keys(actions).sort();
  }
  return out;
}

/** The role's grants with its own log group under one name, so the lists need no generated ids. */
function grants(json: Json, binary: string): Record<string, string[]> {
  const [, fn] = functionByBinary(json, binary);
  const ownLogs = fn.Properties.LoggingConfig.LogGroup.Ref;
  const g = grantsByResource(json, binary);
  g['<own log group>'] = g[ownLogs];
  delete g[ownLogs];
  return Object.fromEntries(Object.entries(g).sort(([a], [b]) => a.localeCompare(b)));
}

function sorted(g: Record<string, string[]>): Record<string, string[]> {
  return Object.fromEntries(Object.entries(g).sort(([a], [b]) => a.localeCompare(b)));
}

describe('execution roles hold exactly the actions in the allow-list next to the code', () => {
  // The archiver exists only when segments are moved; every other knob leaves the grants alone.
  const { json } = synth({ retentionMode: 'archive' });

  for (const crate of [...Object.values(CRATES), ARCHIVER_CRATE]) {
    // A crate the stack names before its code is in the tree (a branch adding a function) has no
    // allow-list yet either; cdk/test/crates.test.ts skips it the same way.
    const inTree = fs.existsSync(path.join(FUNCTIONS_DIR, crate.dir, 'Cargo.toml'));
    test(crate.binaryName, { skip: inTree ? false : `functions/${crate.dir} is not in this tree yet` }, () => {
      const actual = grants(json, crate.binaryName);
      const allowed = sorted(allowList(crate));
      const extra: string[] = [];
      const missing: string[] = [];
      for (const r of new Set([...Object.keys(actual), ...Object.keys(allowed)])) {
        for (const a of actual[r] ?? []) if (!(allowed[r] ?? []).includes(a)) extra.push(`${a} on ${r}`);
        for (const a of allowed[r] ?? []) if (!(actual[r] ?? []).includes(a)) missing.push(`${a} on ${r}`);
      }
      assert.deepEqual(
        { extra, missing },
        { extra: [], missing: [] },
        `functions/${crate.dir}/iam-allow-list.json and the template disagree: "extra" is granted ` +
          'without a call in the allow-list, "missing" is allowed but not granted',
      );
    });
  }

  // authMode=cognito adds the catalog and the user pool to the API's role, listed in a second
  // file next to the first; every other role is the same as in an IAM stack.
  const cognitoFile = path.join(FUNCTIONS_DIR, CRATES.api.dir, 'iam-allow-list.cognito.json');
  test(`${CRATES.api.binaryName} in authMode=cognito`, {
    skip: fs.existsSync(path.join(FUNCTIONS_DIR, CRATES.api.dir, 'Cargo.toml')) ? false : 'not in this tree',
  }, () => {
    const actual = grants(synth({ authMode: 'cognito' }).json, CRATES.api.binaryName);
    const allowed: Record<string, string[]> = { ...allowList(CRATES.api) };
    for (const [resource, actions] of Object.entries(allowListFile(cognitoFile))) {
      assert.equal(allowed[resource], undefined, `${resource} is in both allow-lists`);
      allowed[resource] = actions;
    }
    assert.deepEqual(
      sorted(actual),
      sorted(allowed),
      `functions/${CRATES.api.dir}/iam-allow-list.json plus iam-allow-list.cognito.json and a cognito stack's template disagree`,
    );
    for (const crate of [CRATES.streamRouter, CRATES.snapshotWorker, CRATES.syncWriter]) {
      assert.deepEqual(
        grants(synth({ authMode: 'cognito' }).json, crate.binaryName),
        grants(json, crate.binaryName),
        crate.binaryName,
      );
    }
  });

  test("an allow-list's _untested names grants it holds, each with a reason", () => {
    for (const crate of [...Object.values(CRATES), ARCHIVER_CRATE]) {
      for (const file of allowListFiles(crate, true)) {
        const held = allowListFile(file);
        for (const [entry, why] of Object.entries(readAllowList(file).untested)) {
          const [action, resource] = entry.split(' on ');
          assert.ok(held[resource]?.includes(action), `${file}: _untested ${entry} is not held`);
          assert.ok(typeof why === 'string' && why.length > 0, `${file}: _untested ${entry} says why`);
        }
      }
    }
  });

  test('no role holds an action no code of ours calls and no service needs', () => {
    for (const crate of [...Object.values(CRATES), ARCHIVER_CRATE]) {
      const actions = Object.values(grants(json, crate.binaryName)).flat();
      for (const never of ['dynamodb:BatchGetItem', 'dynamodb:ConditionCheckItem', 'dynamodb:DeleteTable']) {
        assert.ok(!actions.includes(never), `${crate.binaryName} holds ${never}`);
      }
      // Only DELETE /logs/{logId} deletes objects (docs/storage.md, "Deleting a log").
      if (crate !== CRATES.api) {
        assert.ok(!actions.includes('s3:DeleteObject'), `${crate.binaryName} holds s3:DeleteObject`);
      }
    }
    // The API deletes items in batches only (a log's delete), never one by one, except a Dedupe
    // item a log's delete left empty: that needs a condition, which a batch cannot carry.
    for (const [resource, actions] of Object.entries(grants(json, CRATES.api.binaryName))) {
      if (resource !== 'DedupeTable') {
        assert.ok(!actions.includes('dynamodb:DeleteItem'), `the API holds dynamodb:DeleteItem on ${resource}`);
      }
    }
  });
});

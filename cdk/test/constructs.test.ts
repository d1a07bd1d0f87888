/**
 * The house constructs on their own: what SheetlogFunction refuses, and that a SheetlogTable keeps
 * the logical id it is given wherever it sits in the construct tree.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { packageFlags, SheetlogFunction, type SheetlogFunctionProps } from '../lib/constructs/sheetlog-function';
import { SheetlogTable } from '../lib/constructs/sheetlog-table';
import { SetupError } from '../lib/errors';
import { CRATES } from '../lib/sheetlog-stack';
import { stubFunctionsDir } from '../lib/stub-crates';
import { ensureCargoLambda, pinnedCargoLambdaVersion } from '../lib/toolchain';

function props(overrides: Partial<SheetlogFunctionProps> = {}): SheetlogFunctionProps {
  return {
    crate: CRATES.api,
    functionsDir: stubFunctionsDir(),
    description: 'probe',
    architecture: lambda.Architecture.ARM_64,
    timeout: Duration.seconds(10),
    memorySize: 256,
    logRetention: logs.RetentionDays.ONE_WEEK,
    logLevel: 'info',
    ...overrides,
  };
}

const skipBundling = () => new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Probe');

describe('SheetlogFunction', () => {
  test('names the missing crate when its Cargo.toml does not exist', () => {
    assert.throws(
      () =>
        new SheetlogFunction(skipBundling(), 'Fn', props({ functionsDir: path.join(stubFunctionsDir(), 'nowhere') })),
      (err: Error) =>
        err instanceof SetupError &&
        /nowhere\/api\/Cargo\.toml does not exist: the sheetlog-api crate must be in the tree/.test(err.message),
    );
  });

  test('accepts only CDK-owned environment variable names, each bound once', () => {
    const fn = new SheetlogFunction(skipBundling(), 'Fn', props());
    assert.throws(() => fn.bindSetting('TABLE', 'x'), /CDK-owned names are SHEETLOG_\* or RUST_LOG/);
    fn.bindSetting('SHEETLOG_X', 1);
    assert.throws(() => fn.bindSetting('SHEETLOG_X', 2), /SHEETLOG_X is bound twice on sheetlog-api/);
    assert.throws(() => fn.bindSetting('RUST_LOG', 'debug'), /RUST_LOG is bound twice/);
    assert.deepEqual([...fn.environment.keys()], ['RUST_LOG', 'SHEETLOG_X']);
  });

  test('grants bucket access per prefix only, and refuses a prefix that is not a folder', () => {
    const stack = skipBundling();
    const bucket = new s3.Bucket(stack, 'B');
    const fn = new SheetlogFunction(stack, 'Fn', props());
    assert.throws(
      () => fn.bindBucket('SHEETLOG_BUCKET', bucket, [{ prefix: 'payloads', access: ['read'] }]),
      /must look like "name\/"/,
    );
  });

  test('asks for Rust by name when bundling is due and `cargo` is missing', () => {
    const stack = new Stack(new App(), 'Bundles');
    const saved = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      assert.throws(
        () => new SheetlogFunction(stack, 'Fn', props()),
        (err: Error) => err instanceof SetupError && /`cargo` is not on PATH.*rustup/.test(err.message),
      );
    } finally {
      process.env.PATH = saved;
    }
  });
});

describe('ensureCargoLambda', () => {
  const cargoDir = path.dirname(
    spawnSync('sh', ['-c', 'command -v cargo'], { encoding: 'utf8' }).stdout.trim() || '/nonexistent/cargo',
  );

  test('finds cargo-lambda in the project venv when it is not on PATH, and puts the venv on PATH', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'toolchain-'));
    const bin = path.join(root, '.venv', 'bin');
    fs.mkdirSync(bin, { recursive: true });
    fs.writeFileSync(path.join(bin, 'cargo-lambda'), '#!/bin/sh\necho "cargo-lambda 0.0.0-stub"\n', { mode: 0o755 });
    const saved = process.env.PATH;
    process.env.PATH = [cargoDir, '/usr/bin', '/bin'].join(path.delimiter);
    try {
      const lines: string[] = [];
      ensureCargoLambda(root, (l) => lines.push(l));
      assert.deepEqual(lines, [], 'nothing to install');
      assert.equal(process.env.PATH?.split(path.delimiter)[0], bin);
      const probe = spawnSync('cargo', ['lambda', '--version'], { encoding: 'utf8' });
      assert.match(probe.stdout, /0\.0\.0-stub/);
    } finally {
      process.env.PATH = saved;
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  test('installs the version scripts/lib/common.sh pins', () => {
    assert.match(pinnedCargoLambdaVersion(), /^\d+\.\d+\.\d+$/);
    const sh = fs.readFileSync(path.join(__dirname, '..', '..', 'scripts', 'lib', 'common.sh'), 'utf8');
    assert.ok(sh.includes(`CARGO_LAMBDA_VERSION="${pinnedCargoLambdaVersion()}"`));
  });
});

describe('packageFlags', () => {
  test('selects every crate of the stack once, so all functions share one feature resolution', () => {
    const all = Object.values(CRATES);
    const flags = packageFlags(CRATES.streamRouter, all);
    assert.deepEqual(flags, [
      '-p',
      'sheetlog-api',
      '-p',
      'sheetlog-snapshot-worker',
      '-p',
      'sheetlog-stream-router',
      '-p',
      'sheetlog-sync-writer',
    ]);
    // The same flags whichever function is built: that is what lets the builds share artifacts.
    for (const c of all) assert.deepEqual(packageFlags(c, all), flags);
    assert.deepEqual(packageFlags(CRATES.api, []), []);
  });
});

describe('SheetlogTable', () => {
  test('keeps its logical id however deeply it is nested', () => {
    const stack = skipBundling();
    const deep = new Construct(new Construct(stack, 'Outer'), 'Inner');
    new SheetlogTable(deep, 'EntryTable', {
      partitionKey: { name: 's', type: dynamodb.AttributeType.BINARY },
      ephemeral: false,
    });
    assert.deepEqual(Object.keys(Template.fromStack(stack).findResources('AWS::DynamoDB::Table')), ['EntryTable']);
  });
});

#!/usr/bin/env -S npx tsx
/**
 * The CDK app entry point (cdk.json: `npx tsx cdk/bin/app.ts`). Configuration comes from context:
 * `npx cdk deploy -c snapshotInterval=200`; see docs/deploy.md for every key and its default.
 */
import { App } from 'aws-cdk-lib';
import { SetupError } from '../lib/errors';
import { buildApp } from '../lib/sheetlog-app';

try {
  buildApp({ app: new App() });
} catch (err) {
  if (err instanceof SetupError) {
    // A clear message and a failing exit, without a stack trace that buries it.
    console.error(err.message);
    process.exit(1);
  }
  throw err;
}

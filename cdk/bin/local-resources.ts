#!/usr/bin/env -S npx tsx
/**
 * Prints, as JSON, the resources the local stack must create: tables, bucket, queues, functions'
 * environment, event-source mappings with the stream filter. Derived from the synthesized template
 * (bundling skipped, so no Rust build and no AWS credentials are needed).
 *
 *   npx tsx cdk/bin/local-resources.ts [-c key=value ...]
 *
 * Context works as for `cdk synth` (cdk.json, then each -c); see docs/deploy.md. The local stack
 * allows CORS from any origin (LOCAL_STACK_CONTEXT) unless a -c says otherwise.
 */
import { SetupError } from '../lib/errors';
import { describeLocalResourcesOfStack, LOCAL_STACK_CONTEXT } from '../lib/resources';
import { buildApp } from '../lib/sheetlog-app';

function parseArgs(argv: string[]): Record<string, string> {
  const context: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      process.stdout.write('usage: local-resources [-c key=value ...]\n');
      process.exit(0);
    }
    if (arg !== '-c' && arg !== '--context') throw new Error(`unknown argument ${arg} (usage: [-c key=value ...])`);
    const pair = argv[++i] ?? '';
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`${arg} needs key=value, got ${JSON.stringify(pair)}`);
    context[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return context;
}

try {
  const { stack } = buildApp({
    skipBundling: true,
    nag: false,
    context: { ...LOCAL_STACK_CONTEXT, ...parseArgs(process.argv.slice(2)) },
  });
  process.stdout.write(`${JSON.stringify(describeLocalResourcesOfStack(stack), null, 2)}\n`);
} catch (err) {
  console.error(err instanceof SetupError ? err.message : `local-resources: ${(err as Error).message}`);
  process.exit(1);
}

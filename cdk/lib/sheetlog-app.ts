/**
 * Builds the CDK app: configuration from context, the stack, and the cdk-nag AwsSolutions checks
 * (synthesis fails while an unacknowledged finding remains). Used by `cdk/bin/app.ts`, by
 * `cdk/bin/local-resources.ts` and by the tests, so all three synthesize the same thing.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { CONFIG_FILE_NAME, configFromContext, type SheetlogConfig } from './config';
import { CDK_JSON_PATH, REPO_ROOT } from './paths';
import { SheetlogStack } from './sheetlog-stack';
import { stubFunctionsDir } from './stub-crates';

export interface BuildAppOptions {
  /**
   * An App to build into (the CLI's: context arrives through the environment). When absent, a new
   * App gets the context of cdk.json plus `context`.
   */
  readonly app?: App;
  readonly context?: Record<string, unknown>;
  /** Skip bundling: no Rust build, stub crates instead of `functions/` (tests, local-resources). */
  readonly skipBundling?: boolean;
  /** Add the cdk-nag AwsSolutions plugin (default true). */
  readonly nag?: boolean;
  readonly outdir?: string;
  /**
   * The settings file to read (default: `SHEETLOG_CONFIG`, else `sheetlog.config.json` at the
   * repository root); `null` for none.
   */
  readonly configFile?: string | null;
}

export interface SheetlogApp {
  readonly app: App;
  readonly stack: SheetlogStack;
  readonly config: SheetlogConfig;
}

/** The `context` block of cdk.json: the CDK feature flags `cdk synth` runs with. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(fs.readFileSync(CDK_JSON_PATH, 'utf8')) as { context?: Record<string, unknown> };
  return cdkJson.context ?? {};
}

export function buildApp(options: BuildAppOptions = {}): SheetlogApp {
  const skip = options.skipBundling ?? false;
  const app =
    options.app ??
    new App({
      outdir: options.outdir,
      context: {
        ...cdkJsonContext(),
        ...(skip ? { 'aws:cdk:bundling-stacks': [] } : {}),
        ...options.context,
      },
    });
  const file =
    options.configFile === undefined
      ? (process.env.SHEETLOG_CONFIG ?? path.join(REPO_ROOT, CONFIG_FILE_NAME))
      : options.configFile;
  const config = configFromContext(app.node, file);
  const stack = new SheetlogStack(app, config.stackName, {
    config,
    functionsDir: skip ? stubFunctionsDir() : undefined,
  });
  if (options.nag ?? true) {
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  }
  return { app, stack, config };
}

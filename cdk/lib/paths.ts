import * as path from 'node:path';

/** The repository root: everything the CDK app reads is resolved from here, never from the cwd. */
export const REPO_ROOT = path.resolve(__dirname, '..', '..');

/** Where the function crates live (`functions/<dir>/Cargo.toml`). */
export const FUNCTIONS_DIR = path.join(REPO_ROOT, 'functions');

/**
 * The Entry-stream filter, defined once for the stack and the local runner (see docs/storage.md).
 * Always read from the repository, whichever `functionsDir` a stack builds its functions from.
 */
export const STREAM_FILTER_PATH = path.join(FUNCTIONS_DIR, 'core', 'src', 'aws', 'stream_filter.json');

/** cdk.json: the app command and the CDK feature flags that tests must share with `cdk synth`. */
export const CDK_JSON_PATH = path.join(REPO_ROOT, 'cdk.json');

/**
 * The API's routes without an authorizer, defined once for the stack, the API function and the
 * local authorizer stand-in (docs/api.md, "Open routes").
 */
export const OPEN_ROUTES_PATH = path.join(FUNCTIONS_DIR, 'api', 'src', 'open_routes.json');

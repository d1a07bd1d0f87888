/**
 * The HTTP API's routes without an authorizer. They are defined once, in
 * `functions/api/src/open_routes.json` (`{"routes": [{method, path, why}, ...]}`, `_comment`
 * ignored), and read here, by the API function (which asks no grant on them) and by the local
 * authorizer stand-in, so the deployed stack and the local one cannot disagree about which
 * requests need a token. `why` is the route's cdk-nag acknowledgement (AwsSolutions-APIG4).
 */
import * as fs from 'node:fs';
import { OPEN_ROUTES_PATH } from './paths';

export interface OpenRoute {
  /** An HTTP method as API Gateway names it (`GET`). */
  readonly method: string;
  /** In API Gateway's route syntax: `/sheets/{logId}`, `/app/{proxy+}`. */
  readonly path: string;
  /** Why the route may be open: it serves no data a token should guard. */
  readonly why: string;
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

export function loadOpenRoutes(file: string = OPEN_ROUTES_PATH): OpenRoute[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read the open routes ${file}: ${(err as Error).message}`);
  }
  const routes = (parsed as { routes?: unknown } | null)?.routes;
  if (!Array.isArray(routes)) throw new Error(`${file}: expected {"routes": [{"method", "path", "why"}, ...]}`);
  return routes.map((r, i) => {
    const { method, path, why } = (r ?? {}) as Record<string, unknown>;
    if (typeof method !== 'string' || !METHODS.includes(method)) {
      throw new Error(`${file}: routes[${i}].method must be one of ${METHODS.join(', ')}`);
    }
    if (typeof path !== 'string' || !path.startsWith('/')) {
      throw new Error(`${file}: routes[${i}].path must be a path starting with /`);
    }
    if (typeof why !== 'string' || why.trim() === '') {
      throw new Error(`${file}: routes[${i}].why must say why the route needs no authorizer`);
    }
    return { method, path, why };
  });
}

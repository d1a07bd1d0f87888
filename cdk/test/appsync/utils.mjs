// A stand-in for `@aws-appsync/utils` in the tests (./hooks.mjs resolves the import here), with
// the one call the handlers make: `util.unauthorized()`, which ends the handler in AppSync, throws
// `Unauthorized` here. The local runner (scripts/lib/appsync_handler.mjs) stands in the same way.
export class Unauthorized extends Error {
  constructor() {
    super('Unauthorized');
    this.name = 'Unauthorized';
  }
}

export const util = {
  unauthorized() {
    throw new Unauthorized();
  },
};

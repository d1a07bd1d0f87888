// A stand-in for `@aws-appsync/utils/dynamodb` in the tests (./hooks.mjs resolves the import
// here): `get` only describes the GetItem it asks for, as the local runner's does
// (scripts/lib/appsync_handler.mjs); AppSync performs it and hands the item to `response`.
export function get(request) {
  return { operation: 'GetItem', ...request };
}

// A module-resolution hook for the tests (registered by ./run.ts with `module.register`): AppSync
// provides `@aws-appsync/utils` only inside its runtime, so the handler modules' imports of it
// resolve to the stand-ins beside this file. Every other specifier resolves as usual.
const STANDINS = new Map([
  ['@aws-appsync/utils', new URL('./utils.mjs', import.meta.url).href],
  ['@aws-appsync/utils/dynamodb', new URL('./dynamodb.mjs', import.meta.url).href],
]);

export async function resolve(specifier, context, nextResolve) {
  const url = STANDINS.get(specifier);
  return url === undefined ? nextResolve(specifier, context) : { url, shortCircuit: true };
}

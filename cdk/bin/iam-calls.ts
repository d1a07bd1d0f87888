#!/usr/bin/env -S npx tsx
/**
 * Checks every AWS call the functions made in a local run against their roles in the template.
 *
 *   npx tsx cdk/bin/iam-calls.ts RECORD.jsonl [--require BINARY ...] [--exact]
 *
 * RECORD is the file the emulator and `sheetlog dev` wrote with SHEETLOG_IAM_RECORD set
 * (cdk/lib/iam-calls.ts says how). Prints, per function, the actions it exercised under its role
 * and the ones its allow-list holds that no call used, with the allow-list's reason; fails (exit 1)
 * on any call the role does not allow, naming the action, the resource and the statement it
 * would need, and when a function named by --require made no call at all (a run that recorded
 * nothing checks nothing). With --exact (./scripts/test's full run), the grants no call used must
 * be exactly those each allow-list names under `_untested`, each with the reason no test makes
 * that call yet: a grant that falls out of use fails, and so does an `_untested` entry a test now
 * makes (take it off the list).
 */
import * as fs from 'node:fs';
import { allowListFiles, readAllowList } from '../lib/allow-lists';
import {
  type CallLine,
  contextOf,
  coverage,
  describeDenial,
  evaluateRecord,
  grantsOf,
  type Json,
  parseRecord,
  type StackLine,
  type Verdict,
} from '../lib/iam-calls';
import { LOCAL_STACK_CONTEXT } from '../lib/resources';
import { buildApp } from '../lib/sheetlog-app';
import { ARCHIVER_CRATE, CRATES } from '../lib/sheetlog-stack';

function usage(): never {
  process.stderr.write('usage: iam-calls RECORD.jsonl [--require BINARY ...]\n');
  process.exit(2);
}

const templates = new Map<string, Json>();
function templateFor(context: Record<string, string>): Json {
  const key = JSON.stringify(context);
  let template = templates.get(key);
  if (template === undefined) {
    // As `sheetlog dev` describes it (cdk/bin/local-resources.ts).
    const { app, stack } = buildApp({
      skipBundling: true,
      nag: false,
      context: { ...LOCAL_STACK_CONTEXT, ...context },
    });
    template = app.synth().getStackArtifact(stack.artifactId).template;
    templates.set(key, template);
  }
  return template;
}

function crateOf(binary: string) {
  return [...Object.values(CRATES), ARCHIVER_CRATE].find((c) => c.binaryName === binary);
}

/** The allow-lists of `binary` in a stack described with `context`. */
function allowLists(binary: string, context: Record<string, string>) {
  const crate = crateOf(binary);
  return crate ? allowListFiles(crate, context.authMode === 'cognito').map(readAllowList) : [];
}

/** The allow-lists' `_untested` entries (`<action> on <resource>` → why no test makes it). */
function untested(binary: string, context: Record<string, string>): Map<string, string> {
  const out = new Map<string, string>();
  for (const list of allowLists(binary, context)) {
    for (const [k, why] of Object.entries(list.untested)) out.set(k, String(why));
  }
  return out;
}

/** The allow-list's reason for each `key\naction` (the cognito file too for a cognito stack). */
function reasons(binary: string, context: Record<string, string>): Map<string, string> {
  const out = new Map<string, string>();
  for (const list of allowLists(binary, context)) {
    for (const [resource, actions] of Object.entries(list.grants)) {
      for (const [action, why] of Object.entries(actions)) out.set(`${resource}\n${action}`, String(why));
    }
  }
  return out;
}

/** Grants only AWS itself uses: the Lambda runtime's logs, X-Ray, and what CDK grants beside an
 * event source mapping that no code of ours calls (the allow-list says so in its reason). */
function heldForAws(grant: string, why: string): boolean {
  return grant.startsWith('logs:') || grant.startsWith('xray:') || why.includes('no code of ours calls it');
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const required: string[] = [];
  let recordPath: string | undefined;
  let exact = false;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--require') required.push(args[++i] ?? usage());
    else if (args[i] === '--exact') exact = true;
    else if (args[i] === '-h' || args[i] === '--help') usage();
    else if (recordPath === undefined) recordPath = args[i];
    else usage();
  }
  if (!recordPath) usage();
  if (!fs.existsSync(recordPath)) {
    console.error(`iam-calls: ${recordPath} does not exist: no run recorded its calls (SHEETLOG_IAM_RECORD)`);
    return 1;
  }
  const lines = parseRecord(fs.readFileSync(recordPath, 'utf8'));
  const stacks = lines.filter((l): l is StackLine => l.kind === 'stack');
  const calls = lines.filter((l): l is CallLine => l.kind === 'call');
  const verdicts = await evaluateRecord(lines, templateFor);
  const stackOf = new Map(stacks.map((s) => [s.stack, s]));

  let failed = false;
  const byBinary = new Map<string, Verdict[]>();
  for (const v of verdicts) byBinary.set(v.binary, [...(byBinary.get(v.binary) ?? []), v]);
  console.log(
    `IAM check: ${calls.length} distinct calls from ${stacks.length} local stacks, each held against its ` +
      "function's role in the synthesized template",
  );
  for (const [binary, vs] of [...byBinary].sort(([a], [b]) => a.localeCompare(b))) {
    const denied = vs.filter((v) => !v.allowed);
    console.log(`\n${binary}: ${vs.length} calls, ${denied.length} not allowed`);
    for (const d of denied) {
      failed = true;
      console.log(describeDenial(d, stackOf.get(d.stack)?.counterparts).replace(/^/gm, '  '));
    }
    // What the role holds, used or not, over every stack this function ran in.
    const used = new Map<string, string>();
    const unused = new Map<string, string>();
    const known = new Map<string, string>();
    for (const stack of stacks) {
      const mine = vs.filter((v) => v.stack === stack.stack);
      if (mine.length === 0) continue;
      const context = contextOf(stack);
      const why = reasons(binary, context);
      for (const [k, reason] of untested(binary, context)) known.set(k, reason);
      const c = coverage(grantsOf(templateFor(context), binary, stack.counterparts), mine);
      for (const g of c.used) used.set(`${g.action} on ${g.key}`, '');
      for (const g of c.unused) unused.set(`${g.action} on ${g.key}`, why.get(`${g.key}\n${g.action}`) ?? '');
    }
    for (const k of used.keys()) unused.delete(k);
    console.log(`  exercised (${used.size}): ${[...used.keys()].sort().join(', ')}`);
    const forAws = [...unused].filter(([k, why]) => heldForAws(k, why));
    const gaps = [...unused].filter(([k, why]) => !heldForAws(k, why));
    if (forAws.length > 0) {
      console.log(
        `  held for AWS's own use, which no code of ours makes (${forAws.length}): ${forAws.map(([k]) => k).join(', ')}`,
      );
    }
    const listed = gaps.filter(([k]) => known.has(k));
    const unlisted = gaps.filter(([k]) => !known.has(k));
    const stale = [...known.keys()].filter((k) => used.has(k));
    if (unlisted.length === 0 && stale.length === 0) {
      console.log(
        `  the allow-list matches the calls exactly: every other action it holds was exercised` +
          (listed.length > 0 ? `, but for the ${listed.length} its _untested names:` : ''),
      );
    } else {
      console.log(`  held for a call of ours that no run here made (${unlisted.length}; a test should make it):`);
      if (exact && unlisted.length > 0) failed = true;
    }
    for (const [k, why] of unlisted.sort(([a], [b]) => a.localeCompare(b))) console.log(`    ${k} — ${why}`);
    for (const [k] of listed.sort(([a], [b]) => a.localeCompare(b)))
      console.log(`    _untested: ${k} — ${known.get(k)}`);
    for (const k of stale) {
      if (exact) failed = true;
      console.log(`  ${k} is exercised now: take it off _untested in ${binary}'s allow-list`);
    }
  }
  for (const binary of required) {
    if (!byBinary.has(binary)) {
      failed = true;
      console.log(`\n${binary}: NO CALLS RECORDED (required): the run did not exercise this function's role`);
    }
  }
  console.log(failed ? '\nIAM check FAILED' : '\nIAM check passed: every recorded call is allowed by its role');
  return failed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`iam-calls: ${(err as Error).stack ?? err}`);
    process.exit(1);
  },
);

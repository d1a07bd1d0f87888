/**
 * authMode=cognito (issue 31): the user pool and its app client, the catalog table, the HTTP API's
 * authorizer, the API function's environment and grants, the poke channel's membership check, and
 * the outputs. Asserted on the synthesized template; the onSubscribe handler is run from the
 * template's own code string (cdk/test/handlers.test.ts runs its module,
 * cdk/lib/stack/appsync/subscribe-catalog.js).
 */
import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CATALOG_GSI,
  CATALOG_MEMBER_KEY,
  CATALOG_ROLES,
  CRATES,
  ENV,
  LOGICAL_IDS,
  OPEN_ROUTES,
  onSubscribeCatalogCode,
} from '../lib/sheetlog-stack';
import { channelCtx, runTemplateHandler } from './appsync/run';
import {
  assertKeptTable,
  functionByBinary,
  grantsByResource,
  type Json,
  onlyResource,
  resourcesOfType,
  synth,
} from './support';

const API = CRATES.api.binaryName;
const COGNITO = { authMode: 'cognito' } as const;

describe('cognito mode: user pool', () => {
  const { json, template } = synth(COGNITO);
  const pool = json.Resources[LOGICAL_IDS.userPool];

  test('one pool under a fixed logical id, retained and deletion-protected like the tables', () => {
    assert.equal(resourcesOfType(json, 'AWS::Cognito::UserPool').length, 1);
    assert.equal(pool.Type, 'AWS::Cognito::UserPool');
    assert.equal(pool.DeletionPolicy, 'Retain');
    assert.equal(pool.UpdateReplacePolicy, 'Retain');
    assert.equal(pool.Properties.DeletionProtection, 'ACTIVE');
    template.hasOutput('UserPoolId', { Value: { Ref: LOGICAL_IDS.userPool } });
  });

  test('people sign in with their email address, case-insensitively, verified by Cognito', () => {
    assert.deepEqual(pool.Properties.UsernameAttributes, ['email']);
    assert.deepEqual(pool.Properties.UsernameConfiguration, { CaseSensitive: false });
    assert.deepEqual(pool.Properties.AutoVerifiedAttributes, ['email']);
    assert.deepEqual(pool.Properties.AccountRecoverySetting, {
      RecoveryMechanisms: [{ Name: 'verified_email', Priority: 1 }],
    });
  });

  test('accounts by invitation by default; cognitoSelfSignUp=true lets people sign up', () => {
    assert.equal(pool.Properties.AdminCreateUserConfig.AllowAdminCreateUserOnly, true);
    const open = synth({ ...COGNITO, cognitoSelfSignUp: 'true' }).json.Resources[LOGICAL_IDS.userPool];
    assert.equal(open.Properties.AdminCreateUserConfig.AllowAdminCreateUserOnly, false);
  });

  test('the invitation email names the web page and carries the user name and temporary password', () => {
    const invite = pool.Properties.AdminCreateUserConfig.InviteMessageTemplate;
    const text = JSON.stringify(invite.EmailMessage);
    assert.match(text, /\{username\}/);
    assert.match(text, /\{####\}/);
    assert.match(text, new RegExp(onlyResource(json, 'AWS::ApiGatewayV2::Api')[0]));
    assert.match(invite.EmailSubject, /sheetlog/);
  });

  test('a password policy of 12 characters or more, of every character class', () => {
    assert.deepEqual(pool.Properties.Policies.PasswordPolicy, {
      MinimumLength: 12,
      RequireLowercase: true,
      RequireNumbers: true,
      RequireSymbols: true,
      RequireUppercase: true,
      TemporaryPasswordValidityDays: 7,
    });
  });

  test('MFA: optional TOTP by default, required or off when configured, never SMS', () => {
    assert.equal(pool.Properties.MfaConfiguration, 'OPTIONAL');
    assert.deepEqual(pool.Properties.EnabledMfas, ['SOFTWARE_TOKEN_MFA']);
    const required = synth({ ...COGNITO, cognitoMfa: 'required' }).json.Resources[LOGICAL_IDS.userPool];
    assert.equal(required.Properties.MfaConfiguration, 'ON');
    assert.deepEqual(required.Properties.EnabledMfas, ['SOFTWARE_TOKEN_MFA']);
    const off = synth({ ...COGNITO, cognitoMfa: 'off' }).json.Resources[LOGICAL_IDS.userPool];
    assert.equal(off.Properties.MfaConfiguration, 'OFF');
    assert.equal(off.Properties.EnabledMfas, undefined);
    assert.equal(pool.Properties.SmsConfiguration, undefined);
  });

  test('a sandbox (ephemeral) stack deletes its pool with the stack', () => {
    const sandbox = synth({
      ...COGNITO,
      ephemeral: 'true',
      ephemeralConfirm: 'sheetlog',
    }).json.Resources[LOGICAL_IDS.userPool];
    assert.equal(sandbox.DeletionPolicy, 'Delete');
    assert.equal(sandbox.Properties.DeletionProtection, 'INACTIVE');
  });

  test('no pool, client or catalog in iam and jwt mode', () => {
    for (const context of [{}, { jwtIssuer: 'https://issuer.example.com', jwtAudience: 'web' }]) {
      const other = synth(context).json;
      for (const type of ['AWS::Cognito::UserPool', 'AWS::Cognito::UserPoolClient', 'AWS::AppSync::DataSource']) {
        assert.equal(resourcesOfType(other, type).length, 0, type);
      }
      assert.equal(other.Resources[LOGICAL_IDS.catalogTable], undefined);
      for (const output of ['UserPoolId', 'UserPoolClientId', 'CatalogTableName']) {
        assert.equal(other.Outputs[output], undefined, output);
      }
    }
  });
});

describe('cognito mode: app client', () => {
  const { json, template } = synth(COGNITO);
  const client = json.Resources[LOGICAL_IDS.userPoolClient];

  test('one public client (no secret) of the pool, under a fixed logical id', () => {
    assert.equal(resourcesOfType(json, 'AWS::Cognito::UserPoolClient').length, 1);
    assert.equal(client.Type, 'AWS::Cognito::UserPoolClient');
    assert.deepEqual(client.Properties.UserPoolId, { Ref: LOGICAL_IDS.userPool });
    assert.equal(client.Properties.GenerateSecret, false);
    template.hasOutput('UserPoolClientId', { Value: { Ref: LOGICAL_IDS.userPoolClient } });
  });

  test('signs in by SRP (the page and the CLI) and refreshes; no password flow, nothing else', () => {
    assert.deepEqual([...client.Properties.ExplicitAuthFlows].sort(), [
      'ALLOW_REFRESH_TOKEN_AUTH',
      'ALLOW_USER_SRP_AUTH',
    ]);
  });

  test('no hosted UI: no OAuth flows, callback URLs or domain', () => {
    assert.equal(client.Properties.AllowedOAuthFlowsUserPoolClient, false);
    assert.equal(client.Properties.AllowedOAuthFlows, undefined);
    assert.equal(client.Properties.CallbackURLs, undefined);
    assert.equal(resourcesOfType(json, 'AWS::Cognito::UserPoolDomain').length, 0);
  });

  test('hour-long access and id tokens, 30-day refresh tokens that can be revoked, no user enumeration', () => {
    assert.equal(client.Properties.AccessTokenValidity, 60);
    assert.equal(client.Properties.IdTokenValidity, 60);
    assert.equal(client.Properties.RefreshTokenValidity, 30 * 24 * 60);
    assert.deepEqual(client.Properties.TokenValidityUnits, {
      AccessToken: 'minutes',
      IdToken: 'minutes',
      RefreshToken: 'minutes',
    });
    assert.equal(client.Properties.EnableTokenRevocation, true);
    assert.equal(client.Properties.PreventUserExistenceErrors, 'ENABLED');
  });
});

describe('cognito mode: catalog table', () => {
  const { json, template } = synth(COGNITO);
  const table = json.Resources[LOGICAL_IDS.catalogTable];

  test('keys pk/sk (strings) and one index gsi1 (gsi1pk/gsi1sk, all attributes), as the contract says', () => {
    assert.equal(table.Type, 'AWS::DynamoDB::Table');
    assert.deepEqual(table.Properties.KeySchema, [
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ]);
    assert.deepEqual(
      [...table.Properties.AttributeDefinitions].sort((a: Json, b: Json) =>
        a.AttributeName.localeCompare(b.AttributeName),
      ),
      [
        { AttributeName: 'gsi1pk', AttributeType: 'S' },
        { AttributeName: 'gsi1sk', AttributeType: 'S' },
        { AttributeName: 'pk', AttributeType: 'S' },
        { AttributeName: 'sk', AttributeType: 'S' },
      ],
    );
    assert.deepEqual(table.Properties.GlobalSecondaryIndexes, [
      {
        IndexName: CATALOG_GSI.indexName,
        KeySchema: [
          { AttributeName: 'gsi1pk', KeyType: 'HASH' },
          { AttributeName: 'gsi1sk', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ]);
    assert.equal(table.Properties.LocalSecondaryIndexes, undefined);
    assert.equal(table.Properties.TimeToLiveSpecification, undefined, 'no TTL');
    assert.equal(table.Properties.StreamSpecification, undefined, 'no stream');
  });

  test('on-demand, point-in-time recovery, encrypted, deletion-protected and retained like the other tables', () => {
    assertKeptTable(template, table.Properties.KeySchema);
    template.hasOutput('CatalogTableName', { Value: { Ref: LOGICAL_IDS.catalogTable } });
  });

  test('is in the backup plan and has a throttling alarm like the other tables', () => {
    const backedUp = synth({ ...COGNITO, backupPlan: 'true' }).json;
    const [, selection] = onlyResource(backedUp, 'AWS::Backup::BackupSelection');
    assert.match(JSON.stringify(selection.Properties.BackupSelection.Resources), /"CatalogTable"/);
    const alarms = resourcesOfType(json, 'AWS::CloudWatch::Alarm').map(([, a]) => a);
    assert.ok(alarms.some((a) => a.Properties.AlarmDescription === 'DynamoDB throttled requests to the CatalogTable'));
  });
});

describe('cognito mode: HTTP API', () => {
  const { json, template } = synth(COGNITO);

  test('a JWT authorizer whose issuer is the pool and whose audience is the app client', () => {
    const [authorizerId, authorizer] = onlyResource(json, 'AWS::ApiGatewayV2::Authorizer');
    assert.equal(authorizer.Properties.AuthorizerType, 'JWT');
    assert.deepEqual(authorizer.Properties.IdentitySource, ['$request.header.Authorization']);
    assert.deepEqual(authorizer.Properties.JwtConfiguration, {
      Audience: [{ Ref: LOGICAL_IDS.userPoolClient }],
      Issuer: {
        'Fn::Join': [
          '',
          ['https://cognito-idp.', { Ref: 'AWS::Region' }, '.amazonaws.com/', { Ref: LOGICAL_IDS.userPool }],
        ],
      },
    });
    const routes = resourcesOfType(json, 'AWS::ApiGatewayV2::Route').map(([, r]) => r.Properties);
    const data = routes.find((r) => r.RouteKey === '$default');
    assert.equal(data?.AuthorizationType, 'JWT');
    assert.deepEqual(data?.AuthorizerId, { Ref: authorizerId });
    const web = routes.filter((r) => r.RouteKey !== '$default');
    assert.deepEqual(web.map((r) => r.RouteKey).sort(), OPEN_ROUTES.map((r) => `${r.method} ${r.path}`).sort());
    // The page reads how to sign in before it holds a token.
    assert.ok(web.some((r) => r.RouteKey === 'GET /config.json'));
    for (const r of web) assert.equal(r.AuthorizationType, 'NONE', r.RouteKey);
    template.hasOutput('ApiAuthorization', { Value: 'COGNITO' });
    template.hasOutput('WebUrl', {
      Value: {
        'Fn::Join': ['', [{ 'Fn::GetAtt': [onlyResource(json, 'AWS::ApiGatewayV2::Api')[0], 'ApiEndpoint'] }, '/']],
      },
    });
  });
});

describe('cognito mode: the API function', () => {
  const { json } = synth(COGNITO);
  const env = functionByBinary(json, API)[1].Properties.Environment.Variables;

  test('learns the mode, the catalog, the pool and the client from its environment', () => {
    assert.equal(env[ENV.authMode], 'cognito');
    assert.deepEqual(env[ENV.catalogTable], { Ref: LOGICAL_IDS.catalogTable });
    assert.deepEqual(env[ENV.userPoolId], { Ref: LOGICAL_IDS.userPool });
    assert.deepEqual(env[ENV.userPoolClientId], { Ref: LOGICAL_IDS.userPoolClient });
    assert.equal(env[ENV.accessClaim], undefined, 'no JWT access claim in cognito mode');
  });

  test('iam and jwt stacks keep their environment: no auth mode, catalog or pool variables', () => {
    for (const context of [{}, { jwtIssuer: 'https://issuer.example.com', jwtAudience: 'web' }]) {
      const other = functionByBinary(synth(context).json, API)[1].Properties.Environment.Variables;
      for (const name of [ENV.authMode, ENV.catalogTable, ENV.userPoolId, ENV.userPoolClientId]) {
        assert.equal(other[name], undefined, name);
      }
    }
  });

  test('holds exactly the contract’s catalog actions on the table, Query on its index, and two pool lookups', () => {
    const grants = grantsByResource(json, API);
    const catalog = [
      'dynamodb:BatchGetItem',
      'dynamodb:ConditionCheckItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
    ];
    assert.deepEqual(grants[LOGICAL_IDS.catalogTable], catalog);
    assert.deepEqual(
      grants[`${LOGICAL_IDS.catalogTable}/index/*`],
      ['dynamodb:Query'],
      'the listing and invitations by address',
    );
    assert.deepEqual(grants[LOGICAL_IDS.userPool], ['cognito-idp:ListUsers']);
    // Everything else is what an IAM stack's API holds.
    const base = grantsByResource(synth().json, API);
    const rest = Object.fromEntries(
      Object.entries(grants).filter(([r]) => !r.startsWith(LOGICAL_IDS.catalogTable) && r !== LOGICAL_IDS.userPool),
    );
    assert.deepEqual(rest, base);
  });

  test('no other function touches the catalog or the pool', () => {
    for (const crate of [CRATES.streamRouter, CRATES.snapshotWorker, CRATES.syncWriter]) {
      const grants = grantsByResource(json, crate.binaryName);
      for (const r of Object.keys(grants)) {
        assert.ok(!r.startsWith(LOGICAL_IDS.catalogTable) && r !== LOGICAL_IDS.userPool, `${crate.binaryName}: ${r}`);
      }
    }
  });
});

describe('cognito mode: pokes', () => {
  const { json } = synth(COGNITO);
  const [, api] = onlyResource(json, 'AWS::AppSync::Api');
  const [, ns] = onlyResource(json, 'AWS::AppSync::ChannelNamespace');

  test('subscribers connect with the pool’s tokens for this app client; publishers stay IAM', () => {
    const cfg = api.Properties.EventConfig as Json;
    assert.deepEqual(cfg.DefaultPublishAuthModes, [{ AuthType: 'AWS_IAM' }]);
    assert.deepEqual(cfg.DefaultSubscribeAuthModes, [{ AuthType: 'AMAZON_COGNITO_USER_POOLS' }]);
    assert.deepEqual(cfg.ConnectionAuthModes, [{ AuthType: 'AMAZON_COGNITO_USER_POOLS' }]);
    const provider = (cfg.AuthProviders as Json[]).find((p) => p.AuthType === 'AMAZON_COGNITO_USER_POOLS');
    assert.deepEqual(provider?.CognitoConfig.UserPoolId, { Ref: LOGICAL_IDS.userPool });
    assert.deepEqual(provider?.CognitoConfig.AppIdClientRegex, {
      'Fn::Join': ['', ['^', { Ref: LOGICAL_IDS.userPoolClient }, '$']],
    });
    assert.deepEqual(ns.Properties.PublishAuthModes, [{ AuthType: 'AWS_IAM' }]);
    assert.deepEqual(ns.Properties.SubscribeAuthModes, [{ AuthType: 'AMAZON_COGNITO_USER_POOLS' }]);
  });

  test('onSubscribe reads the catalog through a data source whose role may only GetItem there', () => {
    const [dsId, ds] = onlyResource(json, 'AWS::AppSync::DataSource');
    assert.equal(ds.Properties.Type, 'AMAZON_DYNAMODB');
    assert.deepEqual(ds.Properties.DynamoDBConfig.TableName, { Ref: LOGICAL_IDS.catalogTable });
    assert.deepEqual(ns.Properties.HandlerConfigs, {
      OnSubscribe: { Behavior: 'CODE', Integration: { DataSourceName: ds.Properties.Name } },
    });
    assert.ok((json.Resources as Json)[dsId]);
    const roleId = ds.Properties.ServiceRoleArn['Fn::GetAtt'][0];
    const statements = resourcesOfType(json, 'AWS::IAM::Policy')
      .filter(([, p]) => p.Properties.Roles.some((r: Json) => r.Ref === roleId))
      .flatMap(([, p]) => p.Properties.PolicyDocument.Statement as Json[]);
    assert.deepEqual(statements, [
      { Action: 'dynamodb:GetItem', Effect: 'Allow', Resource: { 'Fn::GetAtt': [LOGICAL_IDS.catalogTable, 'Arn'] } },
    ]);
    assert.equal(
      json.Resources[roleId].Properties.AssumeRolePolicyDocument.Statement[0].Principal.Service,
      'appsync.amazonaws.com',
    );
  });

  test('the template’s onSubscribe handler asks for the membership item and admits the catalog’s roles only', () => {
    // The code that deploys, with the stack's key prefixes and roles, run as the local stack runs
    // it (scripts/lib/appsync_handler.mjs); cdk/test/handlers.test.ts runs the module itself.
    const code = String(ns.Properties.CodeHandlers);
    assert.equal(code, onSubscribeCatalogCode());
    const log = '0b6f3c1e-4a53-4d8e-9a41-6c1d2f0e7a10';
    const sub = '7c1e2d3f-0000-4000-8000-00000000000a';
    const identity = { sub, claims: { sub } };
    const roles = [...CATALOG_ROLES, 'admin'];
    const [member, namespace, deeper, nobody, ...answers] = runTemplateHandler(code, [
      { phase: 'request', ctx: channelCtx(`/sheets/${log.toUpperCase()}`, identity) },
      { phase: 'request', ctx: channelCtx('/sheets', identity) },
      { phase: 'request', ctx: channelCtx(`/sheets/${log}/more`, identity) },
      { phase: 'request', ctx: channelCtx(`/sheets/${log}`, {}) },
      ...roles.map((role) => ({
        phase: 'response' as const,
        ctx: channelCtx(`/sheets/${log}`, identity, { result: { role } }),
      })),
      { phase: 'response', ctx: channelCtx(`/sheets/${log}`, identity, { result: null }) },
      {
        phase: 'response',
        ctx: channelCtx(`/sheets/${log}`, identity, { result: { role: 'owner' }, error: { message: 'throttled' } }),
      },
    ]);
    assert.deepEqual(member, {
      kind: 'resolver',
      unauthorized: false,
      value: {
        operation: 'GetItem',
        key: { pk: `${CATALOG_MEMBER_KEY.pkPrefix}${log}`, sk: `${CATALOG_MEMBER_KEY.skPrefix}${sub}` },
        consistentRead: true,
      },
    });
    assert.deepEqual(
      [namespace, deeper, nobody].map((a) => a.unauthorized),
      [true, true, true],
      'the namespace itself, a deeper channel, no identity',
    );
    assert.deepEqual(
      answers.map((a) => a.unauthorized),
      [...CATALOG_ROLES.map(() => false), true, true, true],
      'each role, an unknown role, no membership item, a failed read',
    );
  });
});

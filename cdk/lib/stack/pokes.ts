/**
 * Pokes (docs/sync.md, "Pokes"): the AppSync Event API, its one channel namespace `/sheets/<logId>`
 * with the handlers of the stack's authorization (the modules in `appsync/`, as handlers.ts reads
 * them), the catalog data source the cognito handler reads, and the publishers' grants and settings.
 */

import type { Stack } from 'aws-cdk-lib';
import * as appsync from 'aws-cdk-lib/aws-appsync';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { SheetlogConfig } from '../config';
import type { SignIn } from './auth';
import type { Functions } from './functions';
import { onSubscribeCatalogCode, onSubscribeCode } from './handlers';
import { ENV, POKE_NAMESPACE } from './names';

/**
 * After each commit the API and the sync writer publish the sheet's next sequence on
 * `/sheets/<logId>`; open pages subscribe over AppSync's WebSocket and pull on a poke.
 * Publishers are IAM-authorized (a SigV4-signed POST /event). Subscribers use the stack's
 * authorization: with JWT the same tokens as the HTTP API (OIDC, the same issuer and client
 * ids) and the onSubscribe handler's check of the access claim; with IAM, IAM.
 * With cognito, the user pool's tokens (AppSync verifies them, access or id token, for this
 * app client only) and the onSubscribe handler's catalog lookup.
 */
export function addPokes(
  stack: Stack,
  config: SheetlogConfig,
  signIn: SignIn,
  catalogTable: dynamodb.Table | undefined,
  { api, syncWriter }: Pick<Functions, 'api' | 'syncWriter'>,
): appsync.EventApi {
  const iamAuth = appsync.AppSyncAuthorizationType.IAM;
  const subscribeAuth = config.jwt
    ? appsync.AppSyncAuthorizationType.OIDC
    : signIn.userPool
      ? appsync.AppSyncAuthorizationType.USER_POOL
      : iamAuth;
  const eventApi = addEventApi(stack, config, signIn, subscribeAuth);
  const pokeNamespace = eventApi.addChannelNamespace('SheetsNamespace', {
    channelNamespaceName: POKE_NAMESPACE,
    authorizationConfig: { publishAuthModeTypes: [iamAuth], subscribeAuthModeTypes: [subscribeAuth] },
    code: config.jwt
      ? appsync.Code.fromInline(onSubscribeCode(config.jwt.accessClaim))
      : catalogTable
        ? appsync.Code.fromInline(onSubscribeCatalogCode())
        : undefined,
    subscribeHandlerConfig: catalogTable ? { dataSource: catalogReader(stack, eventApi, catalogTable) } : undefined,
  });
  for (const publisher of [api, syncWriter]) {
    // appsync:EventPublish on this namespace only.
    pokeNamespace.grantPublish(publisher.function);
    publisher
      .bindSetting(ENV.eventsHttpUrl, `https://${eventApi.httpDns}/event`)
      .bindSetting(ENV.eventsNamespace, POKE_NAMESPACE);
  }
  // The page subscribes here (the API writes it into the page).
  api.bindSetting(ENV.eventsRealtimeUrl, `wss://${eventApi.realtimeDns}/event/realtime`);
  return eventApi;
}

/** The Event API: IAM for publishers, and `subscribeAuth` (with its provider) for connections and subscribers. */
function addEventApi(
  stack: Stack,
  config: SheetlogConfig,
  { userPool, userPoolClient }: SignIn,
  subscribeAuth: appsync.AppSyncAuthorizationType,
): appsync.EventApi {
  const iamAuth = appsync.AppSyncAuthorizationType.IAM;
  const escapeRegex = (v: string) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new appsync.EventApi(stack, 'EventApi', {
    apiName: `${config.stackName}-pokes`,
    authorizationConfig: {
      authProviders: [
        { authorizationType: iamAuth },
        ...(config.jwt
          ? [
              {
                authorizationType: appsync.AppSyncAuthorizationType.OIDC,
                openIdConnectConfig: {
                  oidcProvider: config.jwt.issuer,
                  // A regular expression: any of the HTTP API's audiences.
                  clientId: `^(${config.jwt.audience.map(escapeRegex).join('|')})$`,
                },
              },
            ]
          : []),
        ...(userPool && userPoolClient
          ? [
              {
                authorizationType: appsync.AppSyncAuthorizationType.USER_POOL,
                cognitoConfig: {
                  userPool,
                  appIdClientRegex: `^${userPoolClient.userPoolClientId}$`,
                },
              },
            ]
          : []),
      ],
      connectionAuthModeTypes: [subscribeAuth],
      defaultPublishAuthModeTypes: [iamAuth],
      defaultSubscribeAuthModeTypes: [subscribeAuth],
    },
  });
}

/**
 * The poke namespace's view of the catalog: an AppSync DynamoDB data source whose role may only
 * GetItem on the catalog table (the onSubscribe membership check). The role is passed without
 * policy updates, so the data source's own read grant (Query, Scan, BatchGetItem, ...) is not added.
 */
function catalogReader(
  stack: Stack,
  eventApi: appsync.EventApi,
  table: dynamodb.Table,
): appsync.AppSyncDynamoDbDataSource {
  const role = new iam.Role(stack, 'CatalogReaderRole', {
    assumedBy: new iam.ServicePrincipal('appsync.amazonaws.com'),
    description: 'AppSync poke channel: reads a membership item of the catalog',
  });
  role.addToPolicy(new iam.PolicyStatement({ actions: ['dynamodb:GetItem'], resources: [table.tableArn] }));
  return new appsync.AppSyncDynamoDbDataSource(stack, 'CatalogDataSource', {
    api: eventApi,
    table,
    readOnlyAccess: true,
    description: 'Membership items of the catalog, for onSubscribe',
    serviceRole: role.withoutPolicyUpdates(),
  });
}

/**
 * The HTTP API in front of the API function: its authorizer (IAM, JWT or the user pool), the open
 * routes, the user pool's invitation message and the bucket's CORS rule for the page (both name
 * the API's address, so they come after it), the access log and the `$default` stage.
 */

import { Duration, RemovalPolicy, type Stack, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer, HttpJwtAuthorizer, HttpUserPoolAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type * as cognito from 'aws-cdk-lib/aws-cognito';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import type { SheetlogConfig } from '../config';
import type { SheetlogFunction } from '../constructs/sheetlog-function';
import type { SignIn } from './auth';
import { AUTHORIZATION_OUTPUT, OPEN_ROUTES } from './names';

/** The HTTP API with its routes and stage; the page's CORS rule added to `bucket`. */
export function addHttpApi(
  stack: Stack,
  config: SheetlogConfig,
  api: SheetlogFunction,
  bucket: s3.Bucket,
  signIn: SignIn,
): { httpApi: apigw.HttpApi; stage: apigw.HttpStage } {
  const httpApi = newHttpApi(stack, config, api, signIn);
  addOpenRoutes(httpApi, api);
  // The invitation an administrator's `admin-create-user` sends names the page.
  if (signIn.userPool) {
    (signIn.userPool.node.defaultChild as cognito.CfnUserPool).addPropertyOverride(
      'AdminCreateUserConfig.InviteMessageTemplate',
      {
        EmailSubject: `Your ${config.stackName} sheets account`,
        EmailMessage:
          `You have been invited to the spreadsheets at ${httpApi.apiEndpoint}/ . ` +
          'Sign in with {username} and the temporary password {####}; you will then choose your own password.',
      },
    );
  }
  // The page uploads imports straight to S3 with presigned PUTs, from the API's origin.
  bucket.addCorsRule({
    allowedMethods: [s3.HttpMethods.PUT, s3.HttpMethods.GET, s3.HttpMethods.HEAD],
    allowedOrigins: [httpApi.apiEndpoint],
    allowedHeaders: ['*'],
    exposedHeaders: ['ETag'],
    maxAge: 3600,
  });
  return { httpApi, stage: addStage(stack, config, httpApi) };
}

/**
 * The API with its default authorizer. cognito: a JWT authorizer whose issuer is the pool and
 * whose audience is the app client (Cognito access tokens carry it as `client_id`, which API
 * Gateway checks).
 */
function newHttpApi(
  stack: Stack,
  config: SheetlogConfig,
  api: SheetlogFunction,
  { userPool, userPoolClient }: SignIn,
): apigw.HttpApi {
  const authorizer = config.jwt
    ? new HttpJwtAuthorizer('JwtAuthorizer', config.jwt.issuer, { jwtAudience: config.jwt.audience })
    : userPool && userPoolClient
      ? new HttpUserPoolAuthorizer('UserPoolAuthorizer', userPool, { userPoolClients: [userPoolClient] })
      : new HttpIamAuthorizer();
  return new apigw.HttpApi(stack, 'HttpApi', {
    apiName: config.stackName,
    description: `sheetlog HTTP API (${AUTHORIZATION_OUTPUT[config.authMode]} authorization)`,
    defaultIntegration: new HttpLambdaIntegration('ApiIntegration', api.function, {
      payloadFormatVersion: apigw.PayloadFormatVersion.VERSION_2_0,
    }),
    defaultAuthorizer: authorizer,
    // API Gateway answers CORS preflights itself, before any authorizer runs. Off unless
    // origins are configured (corsAllowedOrigins).
    corsPreflight:
      config.corsAllowedOrigins.length === 0
        ? undefined
        : {
            allowOrigins: config.corsAllowedOrigins,
            allowMethods: [apigw.CorsHttpMethod.ANY],
            // A wildcard does not cover Authorization in browsers, hence both.
            allowHeaders: ['authorization', '*'],
            // Readable by browser clients: a replayed idempotent append, and how long to back off.
            exposeHeaders: ['idempotent-replayed', 'retry-after'],
            maxAge: Duration.hours(1),
          },
    createDefaultStage: false,
  });
}

/**
 * The routes without an authorizer (OPEN_ROUTES): the web spreadsheet (functions/api/src/web.rs,
 * served by the same function on the API's own origin), the settings it signs in with
 * (/config.json, needed before it holds a token), /health and /openapi.json. None reads data;
 * every data route keeps the default authorizer, and the page sends the person's token.
 */
function addOpenRoutes(httpApi: apigw.HttpApi, api: SheetlogFunction): void {
  const webIntegration = new HttpLambdaIntegration('WebIntegration', api.function, {
    payloadFormatVersion: apigw.PayloadFormatVersion.VERSION_2_0,
  });
  for (const { method, path, why } of OPEN_ROUTES) {
    for (const route of httpApi.addRoutes({
      path,
      methods: [method as apigw.HttpMethod],
      integration: webIntegration,
      authorizer: new apigw.HttpNoneAuthorizer(),
    })) {
      Validations.of(route).acknowledge({
        id: 'AwsSolutions-APIG4',
        reason: `${why} Every data route is authorized.`,
      });
    }
  }
}

/** The `$default` stage: throttled as configured, every request in the access log. */
function addStage(stack: Stack, config: SheetlogConfig, httpApi: apigw.HttpApi): apigw.HttpStage {
  const accessLogs = new logs.LogGroup(stack, 'ApiAccessLogs', {
    retention: config.logRetentionDays as logs.RetentionDays,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  return new apigw.HttpStage(stack, 'DefaultStage', {
    httpApi,
    stageName: '$default',
    autoDeploy: true,
    throttle: { rateLimit: config.throttlingRateLimit, burstLimit: config.throttlingBurstLimit },
    accessLogSettings: {
      destination: new apigw.LogGroupLogDestination(accessLogs),
      format: AccessLogFormat.custom(
        JSON.stringify({
          requestId: '$context.requestId',
          ip: '$context.identity.sourceIp',
          caller: '$context.identity.caller',
          requestTime: '$context.requestTime',
          routeKey: '$context.routeKey',
          path: '$context.path',
          status: '$context.status',
          responseLength: '$context.responseLength',
          latencyMs: '$context.responseLatency',
          integrationError: '$context.integrationErrorMessage',
          authorizerError: '$context.authorizer.error',
        }),
      ),
    },
  });
}

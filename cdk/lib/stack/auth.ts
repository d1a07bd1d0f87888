/**
 * The user pool people sign in with and its app client (authMode=cognito). The invitation
 * message, which names the page, is added by http-api.ts once the API's address exists.
 */

import { Duration, RemovalPolicy, type Stack, Validations } from 'aws-cdk-lib';
import * as cognito from 'aws-cdk-lib/aws-cognito';
import type { CognitoConfig } from '../config';
import { LOGICAL_IDS } from './names';

/** Who signs in (authMode=cognito only): what the API, the pokes and the HTTP API read. */
export interface SignIn {
  readonly userPool?: cognito.UserPool;
  readonly userPoolClient?: cognito.UserPoolClient;
}

/**
 * The user pool and its app client (authMode=cognito). Sign-in by email; accounts by invitation
 * unless `cognitoSelfSignUp`; TOTP MFA as `cognitoMfa` says. The client is public (a browser
 * page and a CLI cannot keep a secret): SRP sign-in (USER_SRP_AUTH) for both, so the password
 * never leaves the browser or the terminal, and refresh tokens; no password flow
 * (USER_PASSWORD_AUTH); no hosted UI, so no OAuth flows and no domain.
 */
export function addUserPool(
  stack: Stack,
  settings: CognitoConfig,
  ephemeral: boolean,
): [cognito.UserPool, cognito.UserPoolClient] {
  const pool = new cognito.UserPool(stack, LOGICAL_IDS.userPool, {
    selfSignUpEnabled: settings.selfSignUp,
    signInAliases: { email: true },
    signInCaseSensitive: false,
    autoVerify: { email: true },
    keepOriginal: { email: true },
    standardAttributes: { email: { required: true, mutable: true } },
    accountRecovery: cognito.AccountRecovery.EMAIL_ONLY,
    passwordPolicy: {
      minLength: 12,
      requireLowercase: true,
      requireUppercase: true,
      requireDigits: true,
      requireSymbols: true,
      tempPasswordValidity: Duration.days(7),
    },
    mfa: { off: cognito.Mfa.OFF, optional: cognito.Mfa.OPTIONAL, required: cognito.Mfa.REQUIRED }[settings.mfa],
    mfaSecondFactor: settings.mfa === 'off' ? undefined : { otp: true, sms: false },
    deletionProtection: !ephemeral,
    removalPolicy: ephemeral ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
  });
  (pool.node.defaultChild as cognito.CfnUserPool).overrideLogicalId(LOGICAL_IDS.userPool);
  if (settings.mfa !== 'required') {
    Validations.of(pool).acknowledge({
      id: 'AwsSolutions-COG2',
      reason:
        "MFA is each person's choice (cognitoMfa=optional, TOTP) unless the deployer sets cognitoMfa=required; " +
        'requiring it for every colleague is a policy decision of the team, documented in docs/deploy.md.',
    });
  }
  Validations.of(pool).acknowledge({
    id: 'AwsSolutions-COG8',
    reason:
      'The Plus feature plan (threat protection) is billed per monthly active user on top of Essentials; ' +
      'sign-in is by invitation with a strong password policy and optional TOTP MFA. A deployer who wants ' +
      'threat protection switches the pool to Plus (docs/deploy.md).',
  });
  const client = pool.addClient(LOGICAL_IDS.userPoolClient, {
    generateSecret: false,
    authFlows: { userSrp: true },
    disableOAuth: true,
    preventUserExistenceErrors: true,
    enableTokenRevocation: true,
    accessTokenValidity: Duration.hours(1),
    idTokenValidity: Duration.hours(1),
    refreshTokenValidity: Duration.days(30),
  });
  (client.node.defaultChild as cognito.CfnUserPoolClient).overrideLogicalId(LOGICAL_IDS.userPoolClient);
  return [pool, client];
}

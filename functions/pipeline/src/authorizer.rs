//! The request context API Gateway's JWT or IAM authorizer hands the API function, built locally:
//! what `lambda_http` attaches to a request in AWS (`requestContext.authorizer.jwt.claims`, every
//! value a string; or `requestContext.authorizer.iam` with the caller's ARN). Used by the local stack's authorizer (`sheetlog dev --auth jwt`) and the tests'
//! stand-in; never by a deployed function, which gets its context from the invocation event only.

use std::collections::HashMap;

use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpRequestContext;
use lambda_http::request::RequestContext;
use serde_json::json;

/// The API Gateway v2 context of a `method` request to `path` whose verified token carried
/// `claims`.
pub fn jwt_request_context(
    method: &str,
    path: &str,
    claims: &HashMap<String, String>,
) -> Result<RequestContext, serde_json::Error> {
    let context: ApiGatewayV2httpRequestContext = serde_json::from_value(json!({
        "routeKey": "$default",
        "stage": "$default",
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "127.0.0.1",
        },
        "authorizer": {"jwt": {"claims": claims, "scopes": null}},
    }))?;
    Ok(RequestContext::ApiGatewayV2(context))
}

/// The API Gateway v2 context of a `method` request to `path` signed (SigV4) by the IAM caller
/// `user_arn` of `account`: what API Gateway's IAM authorization writes
/// (`requestContext.authorizer.iam`). For an assumed role, `user_arn` is the session's STS ARN
/// (`arn:aws:sts::<account>:assumed-role/<role>/<session>`).
pub fn iam_request_context(
    method: &str,
    path: &str,
    account: &str,
    user_arn: &str,
) -> Result<RequestContext, serde_json::Error> {
    let context: ApiGatewayV2httpRequestContext = serde_json::from_value(json!({
        "routeKey": "$default",
        "stage": "$default",
        "accountId": account,
        "http": {
            "method": method,
            "path": path,
            "protocol": "HTTP/1.1",
            "sourceIp": "127.0.0.1",
        },
        "authorizer": {"iam": {
            "accessKey": "ASIAEXAMPLEEXAMPLE01",
            "accountId": account,
            "callerId": "AROAEXAMPLEEXAMPLE01:session",
            "cognitoIdentity": null,
            "principalOrgId": null,
            "userArn": user_arn,
            "userId": "AROAEXAMPLEEXAMPLE01:session",
        }},
    }))?;
    Ok(RequestContext::ApiGatewayV2(context))
}

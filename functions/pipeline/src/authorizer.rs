//! The request context API Gateway's JWT or IAM authorizer hands the API function, built locally:
//! what `lambda_http` attaches to a request in AWS (`requestContext.authorizer.jwt.claims`, every
//! value a string; or `requestContext.authorizer.iam` with the caller's ARN). Used by the local stack's authorizer (`sheetlog dev --auth jwt`) and the tests'
//! stand-in; never by a deployed function, which gets its context from the invocation event only.
//! Also the parts of a SigV4 `Authorization` header ([`SigV4Header`]), which the local IAM
//! authorizer checks and the local Event API records publishes by.

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

/// The parts of a SigV4 `Authorization` header
/// (`AWS4-HMAC-SHA256 Credential=<key>/<date>/<region>/<service>/aws4_request,
/// SignedHeaders=a;b, Signature=<hex>`): what the local IAM authorizer checks
/// (`sheetlog_local::local_iam`) and the local Event API records a publish by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigV4Header<'a> {
    pub key: &'a str,
    pub date: &'a str,
    pub region: &'a str,
    pub service: &'a str,
    pub signed_headers: Vec<&'a str>,
    pub signature: &'a str,
}

impl<'a> SigV4Header<'a> {
    /// What a SigV4 `Authorization` header starts with.
    pub const SCHEME: &'static str = "AWS4-HMAC-SHA256 ";

    /// The header's parts, or which is missing or malformed.
    pub fn parse(authorization: &'a str) -> Result<Self, &'static str> {
        let rest = authorization
            .strip_prefix(Self::SCHEME)
            .ok_or("not AWS4-HMAC-SHA256")?;
        let (mut credential, mut signed, mut signature) = (None, None, None);
        for part in rest.split(',').map(str::trim) {
            if let Some(v) = part.strip_prefix("Credential=") {
                credential = Some(v);
            } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
                signed = Some(v);
            } else if let Some(v) = part.strip_prefix("Signature=") {
                signature = Some(v);
            }
        }
        let scope: Vec<&str> = credential.ok_or("no Credential")?.split('/').collect();
        let [key, date, region, service, "aws4_request"] = scope[..] else {
            return Err("Credential is not key/date/region/service/aws4_request");
        };
        Ok(Self {
            key,
            date,
            region,
            service,
            signed_headers: signed.ok_or("no SignedHeaders")?.split(';').collect(),
            signature: signature.ok_or("no Signature")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sigv4_header_parts_and_what_is_missing() {
        let h = "AWS4-HMAC-SHA256 Credential=role:sheetlog-api:s1/20261127/us-east-1/appsync/aws4_request, \
                 SignedHeaders=host;x-amz-date, Signature=abc123";
        assert_eq!(
            SigV4Header::parse(h),
            Ok(SigV4Header {
                key: "role:sheetlog-api:s1",
                date: "20261127",
                region: "us-east-1",
                service: "appsync",
                signed_headers: vec!["host", "x-amz-date"],
                signature: "abc123",
            })
        );
        assert_eq!(SigV4Header::parse("Bearer x"), Err("not AWS4-HMAC-SHA256"));
        assert_eq!(
            SigV4Header::parse("AWS4-HMAC-SHA256 Credential=k/d/r/s/aws4_request, Signature=x"),
            Err("no SignedHeaders")
        );
        assert!(
            SigV4Header::parse("AWS4-HMAC-SHA256 Credential=k/d, SignedHeaders=host, Signature=x")
                .is_err()
        );
    }
}

//! AWS Lambda's 6 MB response payload limit: how many bytes a body takes in the payload, and the
//! middleware that turns an answer over the limit into a JSON error on every stack.

use axum::body::Body;
use axum::http::Response;
use axum::response::IntoResponse;

use crate::error::ApiError;

/// The bytes a response body takes in the Lambda response payload, which is what Lambda's 6 MB
/// limit counts: `lambda_http` puts a JSON body into the payload as a JSON string, so every `"`
/// and `\\` in it doubles, a control character becomes an escape (`\\n`, or `\\u00XX`), and
/// the string gains its two quotes. A page of small quoted strings can be a third larger there
/// than on the wire.
pub fn lambda_payload_len(body: &[u8]) -> usize {
    let escapes: usize = body
        .iter()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    body.len() + escapes + 2
}

/// AWS Lambda cannot return more than 6 MB; the emulator and the local server can. Every answer
/// whose Lambda payload ([`lambda_payload_len`]) is over the limit becomes a JSON 500
/// `response-too-large` here, so tests and fuzzing on the local stack fail the way the deployed
/// API would (where API Gateway answers 502), instead of passing.
pub(crate) async fn lambda_response_limit(
    axum::extract::State(limit): axum::extract::State<usize>,
    resp: Response<Body>,
) -> Response<Body> {
    use axum::body::HttpBody;
    let exact = resp.body().size_hint().exact();
    let (parts, body) = resp.into_parts();
    let too_large = |size: usize| {
        tracing::error!(size, limit, "response over the Lambda limit");
        ApiError::ResponseTooLarge { size, limit }.into_response()
    };
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => {
            let payload = lambda_payload_len(&bytes);
            if payload > limit {
                return too_large(payload);
            }
            Response::from_parts(parts, Body::from(bytes))
        }
        Err(_) => too_large(
            exact
                .and_then(|n| usize::try_from(n).ok())
                .unwrap_or(limit + 1),
        ),
    }
}

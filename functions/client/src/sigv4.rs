//! SigV4 signing for a deployed stack whose HTTP API uses IAM authorization: a `reqwest`
//! middleware that signs every request for `execute-api` ([`sheetlog_core::sigv4`]) with the
//! standard AWS credential chain (environment, profile, SSO, instance role). The CLI uses it with
//! `--iam`; the black-box tests use it against a deployment (`SHEETLOG_API_AUTH=sigv4`, set by
//! `scripts/integ`).

use reqwest_middleware::{Middleware, Next};
use sheetlog_core::sigv4::Signer;

#[derive(Debug)]
pub struct SigV4 {
    signer: Signer,
}

impl SigV4 {
    /// Credentials and region from the usual AWS environment.
    pub async fn from_env() -> anyhow::Result<Self> {
        Self::from_env_in(None).await
    }

    /// As [`SigV4::from_env`], with the region given (the one in the API's host name) rather
    /// than configured.
    pub async fn from_env_in(region: Option<String>) -> anyhow::Result<Self> {
        let sdk = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let credentials = sdk
            .credentials_provider()
            .ok_or_else(|| anyhow::anyhow!("no AWS credentials found for SigV4 signing"))?;
        let region = region
            .or_else(|| sdk.region().map(|r| r.to_string()))
            .ok_or_else(|| anyhow::anyhow!("set AWS_REGION for SigV4 signing"))?;
        Ok(Self {
            signer: Signer::new(credentials, region, "execute-api"),
        })
    }

    async fn sign(&self, req: &mut reqwest::Request) -> anyhow::Result<()> {
        let body = req
            .body()
            .and_then(reqwest::Body::as_bytes)
            .unwrap_or_default()
            .to_vec();
        let headers: Vec<(String, String)> = req
            .headers()
            .iter()
            .filter_map(|(k, v)| {
                v.to_str()
                    .ok()
                    .map(|v| (k.as_str().to_owned(), v.to_owned()))
            })
            .collect();
        let new_headers = self
            .signer
            .headers(
                req.method().as_str(),
                req.url().as_str(),
                headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                &body,
            )
            .await
            .map_err(|e| anyhow::anyhow!(e))?;
        for (name, value) in new_headers {
            req.headers_mut().insert(
                http::HeaderName::from_bytes(name.as_bytes())?,
                http::HeaderValue::from_str(&value)?,
            );
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Middleware for SigV4 {
    async fn handle(
        &self,
        mut req: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        self.sign(&mut req)
            .await
            .map_err(reqwest_middleware::Error::Middleware)?;
        next.run(req, extensions).await
    }
}

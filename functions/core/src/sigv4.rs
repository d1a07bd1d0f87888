//! SigV4 request signing (the `aws-sigv4` crate), for the AWS HTTP APIs sheetlog calls without
//! an SDK client: AppSync Events' publish ([`crate::poke`]), Cognito's JSON API
//! ([`crate::users`]) and, in the CLI, an API Gateway with IAM authorization. One [`Signer`] per
//! service and region; it asks its credentials provider on every request, so refreshed
//! credentials are picked up.

use std::time::SystemTime;

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;

/// Why a request could not be signed (credentials unavailable, a header SigV4 cannot sign).
pub type SignError = Box<dyn std::error::Error + Send + Sync>;

/// Signs requests for one service in one region.
#[derive(Debug, Clone)]
pub struct Signer {
    credentials: SharedCredentialsProvider,
    region: String,
    service: &'static str,
}

impl Signer {
    pub fn new(
        credentials: SharedCredentialsProvider,
        region: impl Into<String>,
        service: &'static str,
    ) -> Self {
        Self {
            credentials,
            region: region.into(),
            service,
        }
    }

    /// With the SDK configuration's credentials and region (`us-east-1` when it has none);
    /// `None` when it has no credentials provider (a local endpoint that needs no signature).
    pub fn from_sdk(sdk: &aws_config::SdkConfig, service: &'static str) -> Option<Self> {
        let region = sdk
            .region()
            .map(|r| r.to_string())
            .unwrap_or_else(|| "us-east-1".to_owned());
        Some(Self::new(sdk.credentials_provider()?, region, service))
    }

    pub fn region(&self) -> &str {
        &self.region
    }

    /// The headers SigV4 adds (`authorization`, `x-amz-date`, a session token) to a request
    /// with `headers` and `body`, signed now.
    pub async fn headers<'a>(
        &self,
        method: &'a str,
        url: &'a str,
        headers: impl Iterator<Item = (&'a str, &'a str)>,
        body: &'a [u8],
    ) -> Result<Vec<(String, String)>, SignError> {
        let identity = self.credentials.provide_credentials().await?.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.region)
            .name(self.service)
            .time(SystemTime::now())
            .settings(SigningSettings::default())
            .build()?
            .into();
        let signable = SignableRequest::new(method, url, headers, SignableBody::Bytes(body))?;
        let (instructions, _) = sign(signable, &params)?.into_parts();
        let (added, _) = instructions.into_parts();
        Ok(added
            .into_iter()
            .map(|h| (h.name().to_owned(), h.value().to_owned()))
            .collect())
    }
}

//! `sheetlog login` / `logout` for a stack with Cognito authorization: sign in with email and
//! password (Cognito's SRP flow, `USER_SRP_AUTH`, so the password never leaves the machine; plain
//! HTTP JSON to the pool's endpoint, which the API names in `GET /config.json`; the math is the
//! maintained `aws-cognito-srp` crate's), keep the refresh token in the user's config directory
//! (`$XDG_CONFIG_HOME/sheetlog/credentials.json`, else `~/.config/sheetlog/credentials.json`,
//! mode 0600), one entry per API URL, and trade it for a fresh access token
//! (`REFRESH_TOKEN_AUTH`) when the stored one is about to expire.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::CliError;
use aws_cognito_srp::{SrpClient, SrpError, User, VerificationParameters};

/// One signed-in API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub email: String,
    pub endpoint: String,
    pub client_id: String,
    pub refresh_token: String,
    #[serde(default)]
    pub access_token: Option<String>,
    /// Unix seconds when `access_token` expires.
    #[serde(default)]
    pub expires_at: i64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Credentials {
    /// By API URL (no trailing slash).
    pub apis: BTreeMap<String, Session>,
}

/// Where the credentials live.
pub fn credentials_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|d| !d.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("sheetlog").join("credentials.json"))
}

fn key(api: &str) -> String {
    api.trim_end_matches('/').to_owned()
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> CliError {
    move |e| CliError::Other(format!("{what}: {e}"))
}

impl Credentials {
    pub fn load() -> Credentials {
        credentials_path()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    /// Writes the file readable by its owner only (created so, never widened).
    pub fn save(&self) -> Result<PathBuf, CliError> {
        let path = credentials_path().ok_or_else(|| {
            CliError::Other(
                "neither XDG_CONFIG_HOME nor HOME is set: nowhere to keep the sign-in".into(),
            )
        })?;
        let text =
            serde_json::to_string_pretty(self).map_err(|e| CliError::Other(e.to_string()))?;
        crate::private_file::write_private(&path, text.as_bytes())
            .map_err(io(format!("writing {}", path.display())))?;
        Ok(path)
    }
}

/// One call of Cognito's JSON API without credentials (sign-in needs none).
async fn cognito(endpoint: &str, operation: &str, body: Value) -> Result<Value, CliError> {
    let resp = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/x-amz-json-1.1")
        .header(
            "x-amz-target",
            format!("AWSCognitoIdentityProviderService.{operation}"),
        )
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| CliError::Other(format!("reaching the user pool at {endpoint}: {e}")))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| CliError::Other(format!("reading the user pool's answer: {e}")))?;
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if !status.is_success() {
        let kind = v["__type"].as_str().unwrap_or("error");
        let message = v["message"].as_str().unwrap_or(&text);
        return Err(CliError::Input(format!(
            "sign-in refused ({kind}): {message}"
        )));
    }
    Ok(v)
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Cognito's SRP sign-in: `InitiateAuth` (`USER_SRP_AUTH`) sends `A`, the pool answers with a
/// `PASSWORD_VERIFIER` challenge, and `RespondToAuthChallenge` sends the password claim, which
/// `aws-cognito-srp` computes (with its own random `a` and the current timestamp in Cognito's
/// format). Returns the last answer: tokens, or the next challenge (`NEW_PASSWORD_REQUIRED`, MFA).
pub async fn srp_sign_in(
    endpoint: &str,
    pool_id: &str,
    client_id: &str,
    email: &str,
    password: &str,
) -> Result<Value, CliError> {
    if !pool_id.contains('_') {
        return Err(CliError::Other(format!(
            "signing in with SRP: the user pool id {pool_id:?} has no `_` (expected REGION_NAME)"
        )));
    }
    let srp = SrpClient::new(User::new(pool_id, email, password), client_id, None);
    let v = cognito(
        endpoint,
        "InitiateAuth",
        json!({"AuthFlow": "USER_SRP_AUTH", "ClientId": client_id,
               "AuthParameters": {"USERNAME": email, "SRP_A": srp.get_auth_parameters().a}}),
    )
    .await?;
    if v["ChallengeName"] != "PASSWORD_VERIFIER" {
        return Ok(v);
    }
    let p = &v["ChallengeParameters"];
    let param = |name: &'static str| {
        p[name].as_str().ok_or_else(|| {
            CliError::Other(format!(
                "signing in with SRP: the user pool's challenge has no {name}"
            ))
        })
    };
    let user_id = param("USER_ID_FOR_SRP")?;
    let claim = password_claim(
        &srp,
        param("SECRET_BLOCK")?,
        user_id,
        param("SALT")?,
        param("SRP_B")?,
    )?;
    let mut body = json!({"ChallengeName": "PASSWORD_VERIFIER", "ClientId": client_id,
        "ChallengeResponses": {"USERNAME": user_id,
                               "PASSWORD_CLAIM_SECRET_BLOCK": claim.password_claim_secret_block,
                               "PASSWORD_CLAIM_SIGNATURE": claim.password_claim_signature,
                               "TIMESTAMP": claim.timestamp}});
    if let Some(session) = v["Session"].as_str() {
        body["Session"] = json!(session);
    }
    let mut answer = cognito(endpoint, "RespondToAuthChallenge", body).await?;
    // A next challenge (MFA) is answered for the same user; Cognito names it only here.
    if answer["ChallengeName"].is_string()
        && answer["ChallengeParameters"]["USER_ID_FOR_SRP"].is_null()
        && let Some(params) = answer
            .as_object_mut()
            .map(|o| o.entry("ChallengeParameters").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
    {
        params.insert("USER_ID_FOR_SRP".into(), json!(user_id));
    }
    Ok(answer)
}

/// Where a sign-in gets the code of the person's authenticator app: given what to show them
/// first (the key to add, at the first sign-in), it answers the six digits.
pub type CodeSource<'a> = &'a mut (dyn FnMut(&str) -> Result<String, CliError> + Send);

/// Answers the challenges a pool with MFA (`cognitoMfa`) asks after the password, until it
/// answers tokens: `SOFTWARE_TOKEN_MFA` with the app's code; `MFA_SETUP` (MFA required and none
/// set up yet) by associating an authenticator app (`AssociateSoftwareToken`: the key the person
/// adds to their app), verifying its first code (`VerifySoftwareToken`) and completing the
/// challenge. Any other challenge is returned as it is.
pub async fn answer_mfa(
    endpoint: &str,
    client_id: &str,
    email: &str,
    mut v: Value,
    code: CodeSource<'_>,
) -> Result<Value, CliError> {
    for _ in 0..3 {
        let params = &v["ChallengeParameters"];
        let user = params["USER_ID_FOR_SRP"]
            .as_str()
            .or(params["USERNAME"].as_str())
            .unwrap_or(email)
            .to_owned();
        let session = v["Session"].as_str().unwrap_or_default().to_owned();
        let respond = |name: &str, session: &str, responses: Value| {
            json!({"ChallengeName": name, "ClientId": client_id, "Session": session,
                   "ChallengeResponses": responses})
        };
        v = match v["ChallengeName"].as_str() {
            Some("SOFTWARE_TOKEN_MFA") => {
                let digits = code("code from your authenticator app: ")?;
                let body = respond(
                    "SOFTWARE_TOKEN_MFA",
                    &session,
                    json!({"USERNAME": user, "SOFTWARE_TOKEN_MFA_CODE": digits}),
                );
                cognito(endpoint, "RespondToAuthChallenge", body).await?
            }
            Some("MFA_SETUP") => {
                if !params["MFAS_CAN_SETUP"]
                    .to_string()
                    .contains("SOFTWARE_TOKEN_MFA")
                {
                    return Err(CliError::Input(format!(
                        "the user pool asks to set up MFA by {} only; sheetlog sets up an authenticator app",
                        params["MFAS_CAN_SETUP"]
                    )));
                }
                let a = cognito(
                    endpoint,
                    "AssociateSoftwareToken",
                    json!({"Session": session}),
                )
                .await?;
                let secret = a["SecretCode"].as_str().ok_or_else(|| {
                    CliError::Other("the user pool answered no authenticator key".into())
                })?;
                let session = a["Session"].as_str().unwrap_or(&session).to_owned();
                let digits = code(&format!(
                    "{email} must sign in with an authenticator app. Add this key to one                      (time-based, 6 digits): {secret}
                       (or open otpauth://totp/sheetlog:{email}?secret={secret}&issuer=sheetlog)
                     code from the app: "
                ))?;
                let verified = cognito(
                    endpoint,
                    "VerifySoftwareToken",
                    json!({"Session": session, "UserCode": digits,
                           "FriendlyDeviceName": "sheetlog"}),
                )
                .await?;
                if verified["Status"] != "SUCCESS" {
                    return Err(CliError::Input(format!(
                        "the authenticator app's code was not accepted ({})",
                        verified["Status"]
                    )));
                }
                let session = verified["Session"].as_str().unwrap_or(&session);
                let body = respond("MFA_SETUP", session, json!({"USERNAME": user}));
                cognito(endpoint, "RespondToAuthChallenge", body).await?
            }
            _ => return Ok(v),
        };
    }
    Ok(v)
}

/// The `PASSWORD_VERIFIER` answer for a challenge's `SECRET_BLOCK`, `USER_ID_FOR_SRP`, `SALT` and
/// `SRP_B`. A `B` that is zero modulo the group's prime would let the pool fix the key, so such a
/// challenge is refused before the crate computes anything (RFC 5054, 2.5.4: the client aborts).
fn password_claim(
    srp: &SrpClient<User>,
    secret_block: &str,
    user_id: &str,
    salt: &str,
    srp_b: &str,
) -> Result<VerificationParameters, CliError> {
    let srp_error = |e: SrpError| CliError::Other(format!("signing in with SRP: {e}"));
    if !b_in_group(srp_b) {
        return Err(srp_error(SrpError::InvalidArgument(
            "the user pool's SRP_B is zero or not below the group's prime (refused)".into(),
        )));
    }
    srp.verify(secret_block, user_id, salt, srp_b)
        .map_err(srp_error)
}

/// Whether a challenge's `SRP_B` (hex) is a number in `1..N`: Cognito reduces `B` modulo `N`,
/// so anything else is a broken or hostile answer, and a multiple of `N` would fix the key.
fn b_in_group(srp_b: &str) -> bool {
    let b = srp_b.trim_start_matches('0');
    if b.is_empty() || !b.bytes().all(|c| c.is_ascii_hexdigit()) {
        return false;
    }
    let b = b.to_ascii_uppercase();
    b.len() < RFC5054_N_HEX.len() || (b.len() == RFC5054_N_HEX.len() && b.as_str() < RFC5054_N_HEX)
}

/// RFC 5054's 3072-bit prime, the SRP group Cognito uses: only to bound `B` (`b_in_group`).
const RFC5054_N_HEX: &str = concat!(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD",
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED",
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F",
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B",
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510",
    "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7",
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C",
    "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
);

/// The API's `GET /config.json`: how to sign in. Anything but a 200 with a JSON object is said
/// as such (never read as settings): a 401 or 403 from an API Gateway whose route still needs a
/// token (a stack deployed before `/config.json` was open), a 404 from a URL that is no
/// sheetlog API.
pub async fn client_config(api: &str) -> Result<Value, CliError> {
    let url = format!("{}/config.json", key(api));
    let resp = reqwest::get(&url)
        .await
        .map_err(|e| CliError::Other(format!("reading {url}: {e}")))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| CliError::Other(format!("reading {url}: {e}")))?;
    let excerpt: String = text.chars().take(200).collect();
    if !status.is_success() {
        let hint = match status.as_u16() {
            401 | 403 => {
                "the API asks for credentials before it says how to sign in: deploy the \
                 current stack (GET /config.json needs no authorizer), or check --api"
            }
            404 => "is --api the URL of a sheetlog API?",
            _ => "try again, or check --api",
        };
        return Err(CliError::Other(format!(
            "{url} answered HTTP {status} instead of the sign-in settings ({hint}); it said: {excerpt}"
        )));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(CliError::Other(format!(
            "{url} answered with something other than the sign-in settings (is --api the URL \
             of a sheetlog API?): {excerpt}"
        ))),
    }
}

/// Signs in to the stack at `api` and stores the session; returns where. `code` gives an
/// authenticator app's code when the pool asks for one.
pub async fn login(
    api: &str,
    email: &str,
    password: &str,
    code: CodeSource<'_>,
) -> Result<PathBuf, CliError> {
    let config = client_config(api).await?;
    if config["auth"] != "cognito" {
        return Err(CliError::Input(format!(
            "the API at {api} does not use Cognito sign-in (its auth mode is {}); use --token or --iam",
            config["auth"]
        )));
    }
    let field = |name: &str| {
        config["cognito"][name]
            .as_str()
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| CliError::Other(format!("{api}/config.json names no cognito.{name}")))
    };
    let endpoint = field("endpoint")?;
    let client_id = field("clientId")?;
    let pool_id = field("userPoolId")?;
    let v = srp_sign_in(&endpoint, &pool_id, &client_id, email, password).await?;
    let v = answer_mfa(&endpoint, &client_id, email, v, code).await?;
    let result = &v["AuthenticationResult"];
    let refresh = result["RefreshToken"].as_str().ok_or_else(|| {
        CliError::Other(format!(
            "the user pool asked for more than a password ({}); sign in on the web page first",
            v["ChallengeName"].as_str().unwrap_or("a challenge")
        ))
    })?;
    let mut creds = Credentials::load();
    creds.apis.insert(
        key(api),
        Session {
            email: email.to_owned(),
            endpoint,
            client_id,
            refresh_token: refresh.to_owned(),
            access_token: result["AccessToken"].as_str().map(str::to_owned),
            expires_at: now() + result["ExpiresIn"].as_i64().unwrap_or(0),
        },
    );
    creds.save()
}

/// Forgets the session for `api`; whether there was one.
pub fn logout(api: &str) -> Result<bool, CliError> {
    let mut creds = Credentials::load();
    let had = creds.apis.remove(&key(api)).is_some();
    if had {
        creds.save()?;
    }
    Ok(had)
}

/// A valid access token for `api` from the stored session (refreshed when it expires within a
/// minute); `None` when not signed in.
pub async fn access_token(api: &str) -> Result<Option<String>, CliError> {
    let mut creds = Credentials::load();
    let Some(session) = creds.apis.get_mut(&key(api)) else {
        return Ok(None);
    };
    if let Some(token) = &session.access_token
        && session.expires_at > now() + 60
    {
        return Ok(Some(token.clone()));
    }
    let v = cognito(
        &session.endpoint,
        "InitiateAuth",
        json!({"AuthFlow": "REFRESH_TOKEN_AUTH", "ClientId": session.client_id,
               "AuthParameters": {"REFRESH_TOKEN": session.refresh_token}}),
    )
    .await
    .map_err(|e| CliError::Input(format!("{e}; sign in again with `sheetlog login`")))?;
    let result = &v["AuthenticationResult"];
    let token = result["AccessToken"]
        .as_str()
        .ok_or_else(|| CliError::Other("the refresh answered no access token".into()))?
        .to_owned();
    session.access_token = Some(token.clone());
    session.expires_at = now() + result["ExpiresIn"].as_i64().unwrap_or(0);
    creds.save()?;
    Ok(Some(token))
}

#[cfg(test)]
mod tests {
    //! The crate's claim checked by an independent server half: the verifier, `B` and the
    //! expected signature computed here as a user pool computes them, on a vector made with
    //! pycognito 2024.5.1 (the Python client of Cognito's SRP) and checked against the emulator's
    //! server half in scripts/lib/moto_server.py.

    use super::*;
    use aws_lc_rs::{digest, hmac};
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use num_bigint::BigUint;

    const POOL: &str = "us-east-1_VectorPool";
    const USER: &str = "alice@example.com";
    const PASSWORD: &str = "Sheetlog-demo-1";
    /// The pool's secret `b`: SHA-256("b") twice.
    const B_SECRET: &str = "3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d";
    const SALT: &str = "008f1d6a0c3b9e4d7f2a6c1e0b9d8f7a65";
    /// `B = k·v + g^b` for the password above, as pycognito's vector has it.
    const B: &str = concat!(
        "390c84a0eaea308528deb146b08e6ef392e5ebfc374bdd6f8372ce51cc2f3378670ce47806c77bc9002cb08bd85f71576eb317f47d4e6dd817d726b5165cd15b5f",
        "7d2694195dc66f1bd473f33cd3a636a3d71c8dd11472c384c040ffd8c81cbd3e7eae59f7fb8576bd7a07e9e5ad8afe768b335a2c1d9aa4916ec4027d11a85814",
        "78969ecdc40ee960e4a7377c2eabf3e83e4dcdd3a3340fc0efb1134cd2cde90abe4f5d44c7897044e1b28cebac33c1710891a381db3f554d0f6e7dea889baea3",
        "ffb79f08ac20cb784890feaa20466f0500fbe63735fb650d4e377825daa8fbb2fc2c02b16ab490def07f41059938b7667b5bc0701c160d4682a047bbd64003c8",
        "a6191d79c6a46d84289c45b1d57fe119b7b4b64692fcfb1926b690459c58638cabbbd28e9c836aa9ca56eef8891020a0abb8ce91a6e951c538570559f6c5d305",
        "86b154597b5e4c451e0593e7096a7430338451d6d614fb6fcd8516ac334edd2fcc3ab0976253fdf8c9dd115a348a4e70aa7de5632d818182bdbe4cec9e3334",
    );
    const SECRET_BLOCK: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v";

    fn big(hex: &str) -> BigUint {
        BigUint::parse_bytes(hex.as_bytes(), 16).expect("hex")
    }

    /// A number as Cognito hashes it: big-endian, with a leading zero byte when the top bit is set.
    fn pad(n: &BigUint) -> Vec<u8> {
        let mut bytes = n.to_bytes_be();
        if bytes.first().is_some_and(|b| b & 0x80 != 0) {
            bytes.insert(0, 0);
        }
        bytes
    }

    fn sha256(parts: &[&[u8]]) -> Vec<u8> {
        let mut ctx = digest::Context::new(&digest::SHA256);
        for part in parts {
            ctx.update(part);
        }
        ctx.finish().as_ref().to_vec()
    }

    fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
            .as_ref()
            .to_vec()
    }

    /// What the user pool expects as `PASSWORD_CLAIM_SIGNATURE` from a client that sent `a_hex`
    /// and holds `password`, at `timestamp`: `S = (A·v^u)^b mod N`, the key HKDF-SHA256 of `S`
    /// with salt `u`, the claim an HMAC with it.
    fn expected_claim(a_hex: &str, password: &str, timestamp: &str) -> String {
        let (n, g) = (big(RFC5054_N_HEX), BigUint::from(2u32));
        let k = BigUint::from_bytes_be(&sha256(&[&pad(&n), &pad(&g)]));
        let pool_name = POOL.split_once('_').map(|(_, name)| name).unwrap_or(POOL);
        let identity = sha256(&[
            pool_name.as_bytes(),
            USER.as_bytes(),
            b":",
            password.as_bytes(),
        ]);
        let x = BigUint::from_bytes_be(&sha256(&[&pad(&big(SALT)), &identity]));
        let v = g.modpow(&x, &n);
        let b = big(B_SECRET);
        let big_b = (&k * &v + g.modpow(&b, &n)) % &n;
        assert_eq!(big_b, big(B), "the oracle's B is pycognito's");
        let big_a = big(a_hex);
        let u = BigUint::from_bytes_be(&sha256(&[&pad(&big_a), &pad(&big_b)]));
        let s = (big_a * v.modpow(&u, &n)).modpow(&b, &n);
        let prk = mac(&pad(&u), &pad(&s));
        let key = mac(&prk, b"Caldera Derived Key\x01");
        let message = [
            pool_name.as_bytes(),
            USER.as_bytes(),
            &STANDARD.decode(SECRET_BLOCK).expect("base64"),
            timestamp.as_bytes(),
        ]
        .concat();
        STANDARD.encode(mac(&key[..16], &message))
    }

    fn sign_in(password: &str) -> (String, VerificationParameters) {
        let srp = SrpClient::new(User::new(POOL, USER, password), "client", None);
        let a = srp.get_auth_parameters().a;
        let claim = password_claim(&srp, SECRET_BLOCK, USER, SALT, B).expect("a claim");
        (a, claim)
    }

    #[test]
    fn the_claim_is_the_one_the_pool_expects() {
        let (a, claim) = sign_in(PASSWORD);
        assert_eq!(claim.password_claim_secret_block, SECRET_BLOCK);
        assert_eq!(
            claim.password_claim_signature,
            expected_claim(&a, PASSWORD, &claim.timestamp)
        );
    }

    #[test]
    fn another_password_makes_another_claim() {
        for wrong in ["Sheetlog-demo-2", "sheetlog-demo-1", ""] {
            let (a, claim) = sign_in(wrong);
            assert_ne!(
                claim.password_claim_signature,
                expected_claim(&a, PASSWORD, &claim.timestamp),
                "{wrong:?}"
            );
        }
    }

    #[test]
    fn the_timestamp_is_in_cognitos_format() {
        // `Mon Jan 5 09:05:07 UTC 2026`: the day not zero-padded, the time of day is.
        let (_, claim) = sign_in(PASSWORD);
        let parts: Vec<&str> = claim.timestamp.split(' ').collect();
        assert_eq!(parts.len(), 6, "{}", claim.timestamp);
        assert!(["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"].contains(&parts[0]));
        assert_eq!(parts[1].len(), 3);
        assert!(!parts[2].starts_with('0') && parts[2].parse::<u8>().is_ok());
        assert_eq!(parts[3].len(), 8);
        assert_eq!(parts[4], "UTC");
        assert_eq!(parts[5].len(), 4);
    }

    #[test]
    fn each_sign_in_has_its_own_secret() {
        assert_ne!(sign_in(PASSWORD).0, sign_in(PASSWORD).0);
    }

    #[test]
    fn hostile_or_broken_challenges_are_refused() {
        let srp = SrpClient::new(User::new(POOL, USER, PASSWORD), "client", None);
        let claim = |salt: &str, b: &str, block: &str| password_claim(&srp, block, USER, salt, b);
        let n_plus_one = (big(RFC5054_N_HEX) + 1u32).to_str_radix(16);
        for b in ["0", "000", "", RFC5054_N_HEX, &n_plus_one, "xyz"] {
            assert!(claim(SALT, b, SECRET_BLOCK).is_err(), "B = {b}");
        }
        assert!(claim("xyz", B, SECRET_BLOCK).is_err());
        assert!(claim(SALT, B, "not base64!").is_err());
        assert!(claim(SALT, B, SECRET_BLOCK).is_ok());
        assert!(b_in_group(&RFC5054_N_HEX.to_ascii_lowercase()[1..]));
    }
}

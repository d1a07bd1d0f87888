//! The client's half of Cognito's SRP sign-in (`USER_SRP_AUTH`): the password never leaves the
//! machine; the user pool sends a salt and its public value `B`, and the client answers with an
//! HMAC that only the right password's key makes.
//!
//! Cognito's variant of SRP-6a, as amazon-cognito-identity-js's `AuthenticationHelper` computes
//! it: the 3072-bit group of RFC 5054 with `g = 2` and `k = H(N | g)`; numbers are hashed in
//! "padded hex" form (big-endian bytes, with a leading zero byte when the top bit is set);
//! `x = H(salt | H(poolName | userIdForSrp | ":" | password))`, where `poolName` is the pool id
//! after its `_`; `u = H(A | B)`; `S = (B - k·g^x)^(a + u·x) mod N`; the key is
//! HKDF-SHA256 of `S` with salt `u` and info `"Caldera Derived Key"`, 16 bytes; the claim is
//! `base64(HMAC-SHA256(key, poolName | userIdForSrp | SECRET_BLOCK's bytes | TIMESTAMP))`.

use aws_lc_rs::{digest, hmac, rand};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use num_bigint::BigUint;

/// RFC 5054's 3072-bit prime, the one Cognito uses.
const N_HEX: &str = concat!(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD",
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED",
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F",
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B",
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510",
    "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7",
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C",
    "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
);

/// Why an SRP sign-in could not be computed (each means a broken or hostile answer, or a bad
/// pool id; a wrong password is only found out by the user pool).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SrpError {
    #[error("the user pool id {0:?} has no `_` (expected REGION_NAME)")]
    PoolId(String),
    #[error("the user pool's challenge has no valid {0}")]
    Challenge(&'static str),
    #[error("the user pool's SRP value B is a multiple of N (refused)")]
    ZeroB,
    #[error("the SRP scrambling value u is zero (refused)")]
    ZeroU,
    #[error("no random numbers from the operating system")]
    Random,
}

/// A number as Cognito's clients hash it: their `padHex`, as bytes.
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

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

fn group() -> (BigUint, BigUint, BigUint) {
    // N_HEX is a constant of valid hex digits.
    let n = BigUint::parse_bytes(N_HEX.as_bytes(), 16).unwrap_or_default();
    let g = BigUint::from(2u32);
    let k = BigUint::from_bytes_be(&sha256(&[&pad(&n), &pad(&g)]));
    (n, g, k)
}

fn hex(what: &'static str, s: &str) -> Result<BigUint, SrpError> {
    BigUint::parse_bytes(s.as_bytes(), 16).ok_or(SrpError::Challenge(what))
}

/// One sign-in's secret `a` and public `A = g^a mod N`.
#[derive(Debug)]
pub struct SrpClient {
    pool_name: String,
    a: BigUint,
    big_a: BigUint,
}

impl SrpClient {
    /// A new sign-in for the pool `pool_id` (`eu-west-1_AbCdEf`), with a random `a`.
    pub fn new(pool_id: &str) -> Result<Self, SrpError> {
        let mut a = [0u8; 128];
        rand::fill(&mut a).map_err(|_| SrpError::Random)?;
        Self::with_secret(pool_id, BigUint::from_bytes_be(&a))
    }

    fn with_secret(pool_id: &str, a: BigUint) -> Result<Self, SrpError> {
        let (_, pool_name) = pool_id
            .split_once('_')
            .ok_or_else(|| SrpError::PoolId(pool_id.to_owned()))?;
        let (n, g, _) = group();
        let a = a % &n;
        let big_a = g.modpow(&a, &n);
        Ok(SrpClient {
            pool_name: pool_name.to_owned(),
            a,
            big_a,
        })
    }

    /// `SRP_A` for `InitiateAuth`.
    pub fn srp_a(&self) -> String {
        self.big_a.to_str_radix(16)
    }

    /// `PASSWORD_CLAIM_SIGNATURE` for the `PASSWORD_VERIFIER` challenge, from its parameters
    /// (`USER_ID_FOR_SRP`, `SALT`, `SRP_B`, `SECRET_BLOCK`) and the `TIMESTAMP` sent with it.
    pub fn password_claim(
        &self,
        user_id_for_srp: &str,
        password: &str,
        salt_hex: &str,
        srp_b_hex: &str,
        secret_block: &str,
        timestamp: &str,
    ) -> Result<String, SrpError> {
        let (n, g, k) = group();
        let salt = hex("SALT", salt_hex)?;
        let big_b = hex("SRP_B", srp_b_hex)?;
        if (&big_b % &n) == BigUint::ZERO {
            return Err(SrpError::ZeroB);
        }
        let secret_block = STANDARD
            .decode(secret_block)
            .map_err(|_| SrpError::Challenge("SECRET_BLOCK"))?;
        let u = BigUint::from_bytes_be(&sha256(&[&pad(&self.big_a), &pad(&big_b)]));
        if u == BigUint::ZERO {
            return Err(SrpError::ZeroU);
        }
        let identity = sha256(&[
            self.pool_name.as_bytes(),
            user_id_for_srp.as_bytes(),
            b":",
            password.as_bytes(),
        ]);
        let x = BigUint::from_bytes_be(&sha256(&[&pad(&salt), &identity]));
        // S = (B - k·g^x)^(a + u·x) mod N, kept non-negative by adding k·N before subtracting.
        let kgx = (&k * g.modpow(&x, &n)) % &n;
        let base = (&big_b + &k * &n - kgx) % &n;
        let s = base.modpow(&(&self.a + &u * &x), &n);
        // HKDF-SHA256 (RFC 5869) with one output block, cut to 16 bytes.
        let prk = hmac_sha256(&pad(&u), &pad(&s));
        let key = hmac_sha256(&prk, b"Caldera Derived Key\x01");
        let key = key.get(..16).ok_or(SrpError::Random)?;
        let message = [
            self.pool_name.as_bytes(),
            user_id_for_srp.as_bytes(),
            &secret_block,
            timestamp.as_bytes(),
        ]
        .concat();
        Ok(STANDARD.encode(hmac_sha256(key, &message)))
    }
}

/// `TIMESTAMP` as Cognito wants it: `Mon Jan 5 09:05:07 UTC 2026` (the day not zero-padded, the
/// time of day is).
pub fn timestamp(now: time::OffsetDateTime) -> String {
    let now = now.to_offset(time::UtcOffset::UTC);
    let weekday = &now.weekday().to_string()[..3];
    let month = &now.month().to_string()[..3];
    format!(
        "{weekday} {month} {} {:02}:{:02}:{:02} UTC {}",
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        now.year()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // A vector made with pycognito 2024.5.1's aws_srp (the Python client of Cognito's SRP) and
    // checked against the server half in scripts/lib/moto_server.py: a = SHA-256("a") twice,
    // B = k·v + g^b with b = SHA-256("b") twice and v from the password below.
    const POOL: &str = "us-east-1_VectorPool";
    const USER: &str = "alice@example.com";
    const PASSWORD: &str = "Sheetlog-demo-1";
    const A_SECRET: &str = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bbca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb";
    const SALT: &str = "008f1d6a0c3b9e4d7f2a6c1e0b9d8f7a65";
    const B: &str = concat!(
        "390c84a0eaea308528deb146b08e6ef392e5ebfc374bdd6f8372ce51cc2f3378670ce47806c77bc9002cb08bd85f71576eb317f47d4e6dd817d726b5165cd15b5f",
        "7d2694195dc66f1bd473f33cd3a636a3d71c8dd11472c384c040ffd8c81cbd3e7eae59f7fb8576bd7a07e9e5ad8afe768b335a2c1d9aa4916ec4027d11a85814",
        "78969ecdc40ee960e4a7377c2eabf3e83e4dcdd3a3340fc0efb1134cd2cde90abe4f5d44c7897044e1b28cebac33c1710891a381db3f554d0f6e7dea889baea3",
        "ffb79f08ac20cb784890feaa20466f0500fbe63735fb650d4e377825daa8fbb2fc2c02b16ab490def07f41059938b7667b5bc0701c160d4682a047bbd64003c8",
        "a6191d79c6a46d84289c45b1d57fe119b7b4b64692fcfb1926b690459c58638cabbbd28e9c836aa9ca56eef8891020a0abb8ce91a6e951c538570559f6c5d305",
        "86b154597b5e4c451e0593e7096a7430338451d6d614fb6fcd8516ac334edd2fcc3ab0976253fdf8c9dd115a348a4e70aa7de5632d818182bdbe4cec9e3334",
    );
    const SECRET_BLOCK: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v";
    const TIMESTAMP: &str = "Thu Nov 26 09:05:07 UTC 2026";
    const SIGNATURE: &str = "OHLOv3PQ2DU4EPweHAQxNL0Ko2yKGd3lQIw05F0cSF4=";

    fn client() -> SrpClient {
        let a = BigUint::parse_bytes(A_SECRET.as_bytes(), 16).unwrap();
        SrpClient::with_secret(POOL, a).unwrap()
    }

    #[test]
    fn the_claim_matches_a_known_vector() {
        let c = client();
        assert!(c.srp_a().starts_with("eab00adad57123bd76e4cde90cb57fd9"));
        assert_eq!(
            sha256(&[c.srp_a().as_bytes()])
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "e7bd461fc8c828a6f1e56eb827cfa0f29a73ed23ae5bbad62de5a02ab48226f0"
        );
        let claim = c.password_claim(USER, PASSWORD, SALT, B, SECRET_BLOCK, TIMESTAMP);
        assert_eq!(claim.as_deref(), Ok(SIGNATURE));
    }

    #[test]
    fn another_password_or_timestamp_makes_another_claim() {
        let c = client();
        for (password, timestamp) in [
            ("Sheetlog-demo-2", TIMESTAMP),
            ("sheetlog-demo-1", TIMESTAMP),
            (PASSWORD, "Thu Nov 26 09:05:08 UTC 2026"),
        ] {
            let claim = c.password_claim(USER, password, SALT, B, SECRET_BLOCK, timestamp);
            assert!(
                claim.is_ok_and(|c| c != SIGNATURE),
                "{password} {timestamp}"
            );
        }
    }

    #[test]
    fn padding_is_cognitos() {
        let pad_hex = |n: u64| {
            pad(&BigUint::from(n))
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        assert_eq!(pad_hex(0), "00");
        assert_eq!(pad_hex(0x7f), "7f");
        assert_eq!(pad_hex(0x80), "0080");
        assert_eq!(pad_hex(0xabc), "0abc");
        assert_eq!(pad_hex(0x1234), "1234");
    }

    #[test]
    fn hostile_or_broken_challenges_are_refused() {
        let c = client();
        let claim = |salt: &str, b: &str, block: &str| {
            c.password_claim(USER, PASSWORD, salt, b, block, TIMESTAMP)
        };
        assert_eq!(claim(SALT, "0", SECRET_BLOCK), Err(SrpError::ZeroB));
        assert_eq!(claim(SALT, N_HEX, SECRET_BLOCK), Err(SrpError::ZeroB));
        assert_eq!(
            claim("xyz", B, SECRET_BLOCK),
            Err(SrpError::Challenge("SALT"))
        );
        assert_eq!(
            claim(SALT, "", SECRET_BLOCK),
            Err(SrpError::Challenge("SRP_B"))
        );
        assert_eq!(
            claim(SALT, B, "not base64!"),
            Err(SrpError::Challenge("SECRET_BLOCK"))
        );
        assert!(matches!(
            SrpClient::new("nounderscore"),
            Err(SrpError::PoolId(_))
        ));
    }

    #[test]
    fn timestamps_are_in_cognitos_format() {
        let at = |unix| time::OffsetDateTime::from_unix_timestamp(unix).unwrap();
        assert_eq!(timestamp(at(1_795_683_907)), TIMESTAMP);
        assert_eq!(timestamp(at(1_767_657_599)), "Mon Jan 5 23:59:59 UTC 2026");
    }

    #[test]
    fn each_sign_in_has_its_own_secret() -> Result<(), SrpError> {
        assert_ne!(SrpClient::new(POOL)?.srp_a(), SrpClient::new(POOL)?.srp_a());
        Ok(())
    }
}

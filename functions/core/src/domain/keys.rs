//! Where things live, in one place: S3 key layout, the auto-delete tag, and the DynamoDB size
//! limits every item we write is kept under.

use uuid::Uuid;

use super::LogId;

/// The tag that marks an S3 object as discardable; the bucket's lifecycle rule expires objects
/// that still carry it after a few days.
pub const AUTO_DELETE_TAG_KEY: &str = "sheetlog-auto-delete";
pub const AUTO_DELETE_TAG_VALUE: &str = "true";

/// DynamoDB rejects items above 400 KB. The largest single attribute we write (an inline entry
/// body, a checkpoint) is kept to this, so the key and the other attributes always fit beside it.
pub const MAX_ITEM_ATTRIBUTE_BYTES: usize = 350 * 1024;

/// Everything a log stores in S3 outside snapshots: large bodies and uploaded files.
pub fn payload_prefix(log: LogId) -> String {
    format!("payloads/{log}/")
}

/// A new key for a body the server offloads to S3: scoped to the log, unguessable.
pub fn body_key(log: LogId) -> String {
    format!("{}{}", payload_prefix(log), Uuid::new_v4().simple())
}

/// Where an upload lives. Under the log's prefix, so a commit through another log cannot reach it.
pub fn upload_key(log: LogId, upload_id: &str) -> String {
    format!("{}uploads/{upload_id}", payload_prefix(log))
}

/// Where the XLSX export of a log as of sequence `seq` is kept, written by exporter version
/// `version`: a version never changes, so one export serves every request for it until the
/// auto-delete tag it is written with expires it. Under the payload prefix, so deleting the log
/// deletes it.
pub fn export_key(log: LogId, seq: u64, version: u32) -> String {
    format!("{}exports/{seq:020}-v{version}.xlsx", payload_prefix(log))
}

/// The key of a committed upload's file: each commit copies the uploaded object here, and the
/// entry refers to this copy. Nobody is ever given a URL that writes it, so the bytes an entry
/// names cannot be replaced, re-tagged or deleted through the upload URL.
///
/// Keyed by the upload id and the entity tag of the uploaded version copied, so commits of the
/// same bytes retried after a failure or a timeout land on one key (and find it there) instead of
/// adding a copy each, while a different version PUT to the upload URL in between never lands on
/// the key a committed entry names. Without an entity tag, a fresh key.
pub fn file_key(log: LogId, upload_id: &str, etag: Option<&str>) -> String {
    let tag: String = etag
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(64)
        .collect();
    let version = if tag.is_empty() {
        Uuid::new_v4().simple().to_string()
    } else {
        tag
    };
    format!("{}files/{upload_id}.{version}", payload_prefix(log))
}

/// Whether `key` is one of `log`'s payload objects (a stream record naming any other key is not
/// ours to touch).
pub fn is_payload_of(log: LogId, key: &str) -> bool {
    key.starts_with(&payload_prefix(log))
}

/// Seconds since the Unix epoch, the unit of every `created`/`modified` attribute.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_keys_stay_under_their_logs_prefix() {
        let log = LogId::new_random();
        let other = LogId::new_random();
        assert!(is_payload_of(log, &body_key(log)));
        assert!(is_payload_of(log, &upload_key(log, "u1-x")));
        assert!(is_payload_of(log, &export_key(log, 7, 1)));
        assert!(is_payload_of(log, &file_key(log, "u1-x", Some("\"abc\""))));
        assert_eq!(
            file_key(log, "u1-x", Some("\"abc\"")),
            file_key(log, "u1-x", Some("\"abc\""))
        );
        assert_ne!(
            file_key(log, "u1-x", Some("\"abc\"")),
            file_key(log, "u1-x", Some("\"abd\""))
        );
        assert_ne!(file_key(log, "u1-x", None), file_key(log, "u1-x", None));
        assert!(!is_payload_of(other, &body_key(log)));
        assert_ne!(body_key(log), body_key(log));
    }
}

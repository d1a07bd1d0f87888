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

/// A new key for a committed upload's file: each commit copies the uploaded object here, and the
/// entry refers to this copy. Nobody is ever given a URL that writes it, so the bytes an entry
/// names cannot be replaced, re-tagged or deleted through the upload URL.
pub fn file_key(log: LogId) -> String {
    format!("{}files/{}", payload_prefix(log), Uuid::new_v4().simple())
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
        assert!(is_payload_of(log, &file_key(log)));
        assert_ne!(file_key(log), file_key(log));
        assert!(!is_payload_of(other, &body_key(log)));
        assert_ne!(body_key(log), body_key(log));
    }
}

//! Named versions: a sequence of a log with a name people gave it ("before the Q3 import"),
//! kept in the Clients table under the log's `v` partition, one item per version keyed by its
//! sequence (`docs/storage.md`, "Clients table"; `docs/api.md`, "Named versions").

use super::LogId;
use super::clients::tagged_key;

/// The tag of a log's named-versions partition: `v`.
pub const VERSION_TAG: u8 = b'v';

/// Most characters in a version's name.
pub const MAX_VERSION_NAME_CHARS: usize = 100;

/// Most named versions one log keeps; naming another is refused until one is deleted.
pub const MAX_NAMED_VERSIONS: usize = 1_000;

/// One named version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedVersion {
    /// The version: the sheet as of every entry before this sequence (`cells?at=seq`).
    pub seq: u64,
    pub name: String,
    /// When it was first named, Unix milliseconds.
    pub created_at: i64,
    /// Who named it (the caller's proven subject), when there was one.
    pub by: Option<String>,
}

/// Partition key of a log's named versions (sort key: the version's sequence).
pub fn versions_key(log: LogId) -> Vec<u8> {
    tagged_key(log, VERSION_TAG, "")
}

/// A version's name as kept: trimmed, 1 to [`MAX_VERSION_NAME_CHARS`] characters, no control
/// characters; the reason otherwise.
pub fn clean_version_name(name: &str) -> Result<String, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("a version's name must not be empty".into());
    }
    if name.chars().count() > MAX_VERSION_NAME_CHARS {
        return Err(format!(
            "a version's name is at most {MAX_VERSION_NAME_CHARS} characters"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err("a version's name must not hold control characters".into());
    }
    Ok(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(
            clean_version_name("  Q3 import ").as_deref(),
            Ok("Q3 import")
        );
        assert!(clean_version_name("   ").is_err());
        assert!(clean_version_name(&"x".repeat(101)).is_err());
        assert!(clean_version_name(&"é".repeat(100)).is_ok());
        assert!(clean_version_name("a\nb").is_err());
    }

    #[test]
    fn the_partition_is_the_log_and_its_tag() {
        let log = LogId::new_random();
        let k = versions_key(log);
        assert_eq!(&k[..16], log.as_bytes());
        assert_eq!(k[16], VERSION_TAG);
        assert_eq!(k.len(), 17);
    }
}

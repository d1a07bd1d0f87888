//! `sheetlog-maintenance`: tools an operator runs by hand against a deployed (or local) stack.
//!
//! Layout:
//! - [`reprocess`] — re-start side effects that never happened for entries written since a date
//! - [`archive`]   — segment retention: archive old segments to S3, or delete them
//! - [`rebuild`]   — rebuild every snapshot's objects from the log
//! - [`index_clients`] — give Clients items written before the `byLog` index its key attribute
//! - [`logs`]      — find every log of a stack (a scan of the Segment table's keys)
//! - `main.rs`     — the `sheetlog-maintenance` command line

pub mod archive;
pub mod index_clients;
pub mod logs;
pub mod rebuild;
pub mod reprocess;

pub use archive::{Mode, Policy, Retention, RetentionError, RetentionReport, RunOptions};
pub use rebuild::{
    PAGE_ENTRIES, RebuildError, RebuildOptions, RebuildReport, RebuildTables, Rebuilder,
};
pub use reprocess::{ReprocessError, ReprocessOptions, ReprocessReport, Reprocessor};

/// Parses an RFC 3339 date-time (`2026-11-20T00:00:00Z`) to Unix epoch seconds.
pub fn parse_since(raw: &str) -> Result<i64, String> {
    time::OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339)
        .map(|t| t.unix_timestamp())
        .map_err(|e| {
            format!("{raw:?} is not an RFC 3339 date-time (like 2026-11-20T00:00:00Z): {e}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_rfc3339_with_any_offset() {
        assert_eq!(parse_since("1970-01-01T00:01:00Z"), Ok(60));
        assert_eq!(parse_since("1970-01-01T01:00:00+01:00"), Ok(0));
        assert!(parse_since("yesterday").is_err());
        assert!(parse_since("2026-11-20").is_err());
    }
}

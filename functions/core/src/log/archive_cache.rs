//! The archive a reader read last (`docs/storage.md`, "Archived segments"): kept for the pages
//! that follow, so one read of an archived segment costs one S3 GET, not one per page.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::domain::{EntryRecord, LogId};
use crate::ports::EntryPage;

/// A segment read from its archive (cheap to clone: the records are shared).
#[derive(Clone)]
pub(crate) struct Archived {
    pub(crate) segment: u64,
    pub(crate) records: Arc<[EntryRecord]>,
}

/// How long an `EventLog` keeps the archive it read last: about one Lambda invocation, so a
/// reader's pages share it while a warm container does not serve an archive for long after
/// retention deleted it (an archive never changes, but `Mode::Delete` can remove history).
pub const ARCHIVE_KEEP: Duration = Duration::from_secs(60);

/// The archive an `EventLog` read last (one segment of one log; a new one replaces it, so
/// memory holds at most one archive), for [`ARCHIVE_KEEP`] after it was read.
/// Clones of the `EventLog` share it.
#[derive(Default, Clone)]
pub(crate) struct ArchiveCache(pub(crate) Arc<Mutex<Option<(LogId, Archived, Instant)>>>);

impl ArchiveCache {
    pub(crate) fn get(&self, log: LogId) -> Option<Archived> {
        let slot = self.0.lock().ok()?;
        slot.as_ref()
            .filter(|(l, _, at)| *l == log && at.elapsed() < ARCHIVE_KEEP)
            .map(|(_, a, _)| a.clone())
    }

    pub(crate) fn keep(&self, log: LogId, archived: Archived) {
        if let Ok(mut slot) = self.0.lock() {
            let same = slot
                .as_ref()
                .is_some_and(|(l, a, _)| *l == log && a.segment == archived.segment);
            if !same {
                *slot = Some((log, archived, Instant::now()));
            }
        }
    }
}

impl std::fmt::Debug for ArchiveCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArchiveCache")
    }
}

impl Archived {
    pub(crate) fn page(&self, num: u64, limit: usize) -> EntryPage {
        let len = self.records.len();
        let start = usize::try_from(num).unwrap_or(usize::MAX).min(len);
        let end = start.saturating_add(limit).min(len);
        EntryPage {
            entries: self.records[start..end].to_vec(),
            more: end < len,
        }
    }
}

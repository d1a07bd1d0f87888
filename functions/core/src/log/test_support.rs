//! Setup the log's unit tests share.

use bytes::Bytes;

use super::{AppendOptions, EventLog};
use crate::config::LogConfig;
use crate::domain::{EntryType, LogId, NewEntry};
use crate::memory::{MemLogStore, MemPayloadStore};

/// A log over the in-memory stores with the default settings.
pub(super) fn mem_log() -> EventLog<MemLogStore, MemPayloadStore> {
    EventLog::new(
        MemLogStore::new(),
        MemPayloadStore::new(),
        LogConfig::default(),
    )
    .expect("the default settings are valid")
}

/// Appends one entry of `kind` per body, in order.
pub(super) async fn append_bodies<S, P>(
    log: &EventLog<S, P>,
    id: LogId,
    kind: EntryType,
    bodies: &[&'static [u8]],
) where
    S: crate::ports::LogEntries + crate::ports::DedupeKeys,
    P: crate::ports::PayloadStore,
{
    for b in bodies {
        log.append(
            id,
            NewEntry::new(kind, 1, Bytes::from_static(b)),
            AppendOptions::default(),
        )
        .await
        .expect("append");
    }
}

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

/// A one-cell `set` of A1 to `v`.
#[cfg(feature = "engine")]
pub(super) fn set_a1(v: f64) -> crate::sheet::event::Event {
    crate::sheet::event::Event::from_parts(
        "set",
        serde_json::json!({"cells": [{"ref": "A1", "value": v}]}),
    )
    .unwrap()
}

/// Pushed mutations `ids`, each setting A1 to its own id.
#[cfg(feature = "engine")]
pub(super) fn set_mutations(ids: std::ops::RangeInclusive<u64>) -> Vec<super::PushedMutation> {
    ids.map(|id| super::PushedMutation {
        id,
        event: Ok(set_a1(id as f64)),
        base: None,
        then: Vec::new(),
    })
    .collect()
}

//! Deleting a log (`DELETE /logs/{logId}`; `docs/storage.md`, "Deleting a log"): a tombstone
//! first, then every item and object of the log in pages, within a time budget. Each step is safe
//! to repeat and to be cut off after, so a delete that ran out of time (or whose Lambda timed out)
//! is finished by calling it again.

use std::time::Instant;

use uuid::Uuid;

use crate::domain::LogId;
use crate::error::{LogError, StoreError};
use crate::ports::{LogPurge, ObjectPurge};

/// Items deleted per page (four BatchWriteItem calls).
pub const ITEM_PAGE: usize = 100;
/// Objects listed and deleted per page (one DeleteObjects call).
pub const OBJECT_PAGE: usize = 1000;

/// Prefix of a log's payload objects (entry bodies, uploads, committed files, archives).
pub fn payload_prefix(log: LogId) -> String {
    format!("payloads/{log}/")
}

/// Prefix of a log's snapshot objects (manifests, chunks, checkpoints, fork markers).
pub fn snapshot_prefix(log: LogId) -> String {
    format!("snapshots/{log}/")
}

/// The two markers a fork writes for each log whose snapshot chunks its first snapshot shares:
/// `snapshots/<source>/forks/<fork>` (the source's chunks are in use) and
/// `snapshots/<fork>/sources/<source>` (so deleting the fork removes the first one).
pub fn fork_markers(source: LogId, fork: LogId) -> [String; 2] {
    [
        format!("snapshots/{source}/forks/{fork}"),
        format!("snapshots/{fork}/sources/{source}"),
    ]
}

/// Removes what a fork that failed before its log was created wrote: every object under the
/// fork's snapshot prefix (manifest, chunks, its `sources/` markers) and the `forks/` marker it
/// left with each source in `sources`. Returns how many objects were deleted. The fork's id was
/// fresh and no log holds it, so nothing else can be using them.
pub async fn discard_failed_fork(
    objects: &dyn ObjectPurge,
    fork: LogId,
    sources: &[LogId],
) -> Result<u64, StoreError> {
    let mut deleted = 0u64;
    let markers: Vec<String> = sources
        .iter()
        .map(|s| fork_markers(*s, fork)[0].clone())
        .collect();
    if !markers.is_empty() {
        objects.delete_keys(&markers).await?;
        deleted += markers.len() as u64;
    }
    let prefix = snapshot_prefix(fork);
    loop {
        let keys = objects.list_keys(&prefix, OBJECT_PAGE).await?;
        if keys.is_empty() {
            return Ok(deleted);
        }
        objects.delete_keys(&keys).await?;
        deleted += keys.len() as u64;
    }
}

/// What a call did, and whether the log is now fully deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Nothing of the log is left (except the tombstone, and snapshot objects kept for forks).
    pub done: bool,
    /// Items deleted by this call.
    pub items: u64,
    /// Objects deleted by this call.
    pub objects: u64,
    /// The log's snapshot objects are kept because a fork shares its chunks.
    pub kept_for_forks: bool,
}

/// Whether the log was deleted: [`LogError::LogDeleted`] when it was.
pub async fn check_live(tables: &dyn LogPurge, log: LogId) -> Result<(), LogError> {
    match tables.log_meta(log).await? {
        Some(meta) if meta.deleted.is_some() => Err(LogError::LogDeleted(log)),
        _ => Ok(()),
    }
}

/// Starts (or continues) deleting `log`: writes the tombstone unless it is there, then deletes
/// pages of items and objects until none is left or `deadline` passes (at least one page each
/// call, so every call makes progress). A log with neither a tombstone nor a segment does not
/// exist: [`LogError::LogNotFound`], and nothing is written.
pub async fn delete_log(
    tables: &dyn LogPurge,
    objects: &dyn ObjectPurge,
    log: LogId,
    now: i64,
    deadline: Instant,
) -> Result<PurgeReport, LogError> {
    let meta = tables.log_meta(log).await?;
    if meta.as_ref().and_then(|m| m.deleted).is_none() {
        if !tables.has_segments(log).await? {
            return Err(LogError::LogNotFound(log));
        }
        tables.mark_deleted(log, now).await?;
    }
    Ok(purge(tables, objects, log, deadline).await?)
}

async fn purge(
    tables: &dyn LogPurge,
    objects: &dyn ObjectPurge,
    log: LogId,
    deadline: Instant,
) -> Result<PurgeReport, StoreError> {
    let mut report = PurgeReport::default();
    let out_of_time = || Instant::now() >= deadline;
    loop {
        let n = tables.purge_items(log, ITEM_PAGE).await?;
        report.items += n as u64;
        if n == 0 {
            break;
        }
        if out_of_time() {
            return Ok(report);
        }
    }
    // This log's own fork markers on its sources: the sources' chunks are no longer in use by it.
    let sources_prefix = format!("{}sources/", snapshot_prefix(log));
    loop {
        let markers = objects.list_keys(&sources_prefix, OBJECT_PAGE).await?;
        if markers.is_empty() {
            break;
        }
        let mut both = Vec::with_capacity(markers.len() * 2);
        for marker in markers {
            if let Some(source) = marker
                .strip_prefix(&sources_prefix)
                .and_then(|s| Uuid::parse_str(s).ok())
            {
                let [on_source, _] = fork_markers(LogId::from_uuid(source), log);
                both.push(on_source);
            }
            both.push(marker);
        }
        objects.delete_keys(&both).await?;
        report.objects += both.len() as u64;
        if out_of_time() {
            return Ok(report);
        }
    }
    let forks_prefix = format!("{}forks/", snapshot_prefix(log));
    report.kept_for_forks = !objects.list_keys(&forks_prefix, 1).await?.is_empty();
    let mut prefixes = vec![payload_prefix(log)];
    if !report.kept_for_forks {
        prefixes.push(snapshot_prefix(log));
    }
    for prefix in prefixes {
        loop {
            let keys = objects.list_keys(&prefix, OBJECT_PAGE).await?;
            if keys.is_empty() {
                break;
            }
            objects.delete_keys(&keys).await?;
            report.objects += keys.len() as u64;
            if out_of_time() {
                return Ok(report);
            }
        }
    }
    report.done = true;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::config::LogConfig;
    use crate::log::test_support::raw_set_entry;
    use crate::log::{AppendOptions, EventLog};
    use crate::memory::{MemLogStore, MemPayloadStore};
    use crate::ports::PayloadStore;

    async fn log_with_entries(
        log: &EventLog<Arc<MemLogStore>, Arc<MemPayloadStore>>,
        n: usize,
    ) -> LogId {
        let id = log.create().await.expect("create").log;
        for _ in 0..n {
            log.append(id, raw_set_entry(b"x"), AppendOptions::default())
                .await
                .expect("append");
        }
        id
    }

    /// A delete given no time does one page per call, and repeated calls finish it; the
    /// tombstone answers from the first call on, and another log is untouched.
    #[tokio::test]
    async fn a_delete_cut_short_is_finished_by_calling_again() {
        let store = Arc::new(MemLogStore::new());
        let objects = Arc::new(MemPayloadStore::new());
        let log =
            EventLog::new(store.clone(), objects.clone(), LogConfig::default()).expect("config");
        let doomed = log_with_entries(&log, 250).await;
        let kept = log_with_entries(&log, 3).await;
        for id in [doomed, kept] {
            objects
                .put_discardable(&format!("payloads/{id}/a"), Bytes::from_static(b"p"))
                .await
                .expect("put");
        }
        let mut calls = 0;
        let mut items = 0;
        loop {
            calls += 1;
            let report = delete_log(&*store, &*objects, doomed, 1, Instant::now())
                .await
                .expect("delete");
            assert!(matches!(
                check_live(&*store, doomed).await,
                Err(LogError::LogDeleted(_))
            ));
            items += report.items;
            if report.done {
                break;
            }
            assert!(calls < 10, "the delete makes no progress");
        }
        assert!(
            calls >= 3,
            "251 entries in pages of {ITEM_PAGE}: {calls} calls"
        );
        // 251 entries and one segment item.
        assert_eq!(items, 252);
        assert!(store.entries(doomed).expect("entries").is_empty());
        assert!(!store.has_segments(doomed).await.expect("segments"));
        assert_eq!(
            objects
                .list_keys(&payload_prefix(doomed), 10)
                .await
                .expect("list"),
            Vec::<String>::new()
        );
        // Done is done: again answers done, and nothing else was touched.
        let again = delete_log(&*store, &*objects, doomed, 2, Instant::now())
            .await
            .expect("again");
        assert!(again.done && again.items == 0);
        assert_eq!(store.entries(kept).expect("entries").len(), 4);
        assert_eq!(
            objects
                .list_keys(&payload_prefix(kept), 10)
                .await
                .expect("list")
                .len(),
            1
        );
        assert!(check_live(&*store, kept).await.is_ok());
        let missing = LogId::new_random();
        assert!(matches!(
            delete_log(&*store, &*objects, missing, 1, Instant::now()).await,
            Err(LogError::LogNotFound(_))
        ));
        assert!(check_live(&*store, missing).await.is_ok());
    }

    /// Elements of a Dedupe item that belong to the given keys (bare suffixes and values).
    fn elements_of(store: &MemLogStore, keys: &[crate::domain::dedupe::DedupeKey]) -> usize {
        use aws_sdk_dynamodb::types::AttributeValue;
        keys.iter()
            .map(|k| {
                let item = store
                    .dedupe_item(&k.prefix)
                    .expect("item")
                    .unwrap_or_default();
                item.values()
                    .filter_map(|v| match v {
                        AttributeValue::Bs(set) => Some(set),
                        _ => None,
                    })
                    .flatten()
                    .filter(|e| e.as_ref().starts_with(&k.suffix))
                    .count()
            })
            .sum()
    }

    /// A delete removes the idempotency keys the log's entries recorded, page by page with the
    /// entries, and leaves other logs' keys in the same Dedupe items; a delete cut short between
    /// pages finishes on the next call.
    #[tokio::test]
    async fn a_delete_removes_the_logs_idempotency_keys_and_keeps_the_others() {
        use crate::domain::dedupe::{DedupeKey, KeyKind};
        use crate::log::IdempotencyKey;
        let store = Arc::new(MemLogStore::new());
        let objects = Arc::new(MemPayloadStore::new());
        // One bit of prefix: two Dedupe items, so both logs' keys share them.
        let cfg = LogConfig {
            dedupe_prefix_bits: 1,
            ..LogConfig::default()
        };
        let log = EventLog::new(store.clone(), objects.clone(), cfg).expect("config");
        let doomed = log.create().await.expect("create").log;
        let kept = log.create().await.expect("create").log;
        let mut keys = std::collections::HashMap::new();
        for (id, n) in [(doomed, 150), (kept, 20)] {
            for i in 0..n {
                let key = format!("k{i}");
                log.append_once(
                    id,
                    raw_set_entry(format!("x{i}")),
                    AppendOptions::default(),
                    &IdempotencyKey::request(&key),
                )
                .await
                .expect("append");
                keys.entry(id).or_insert_with(Vec::new).push(DedupeKey::new(
                    1,
                    id,
                    KeyKind::Request,
                    &key,
                ));
            }
        }
        assert_eq!(elements_of(&store, &keys[&doomed]), 300);
        assert_eq!(elements_of(&store, &keys[&kept]), 40);
        // The first call, given no time, deletes one page of entries and their keys only.
        let first = delete_log(&*store, &*objects, doomed, 1, Instant::now())
            .await
            .expect("delete");
        assert!(!first.done);
        let left = elements_of(&store, &keys[&doomed]);
        assert_eq!(left, 2 * (151 - ITEM_PAGE), "keys left after one page");
        loop {
            let r = delete_log(&*store, &*objects, doomed, 1, Instant::now())
                .await
                .expect("delete");
            if r.done {
                break;
            }
        }
        assert_eq!(elements_of(&store, &keys[&doomed]), 0);
        assert_eq!(elements_of(&store, &keys[&kept]), 40);
        // The kept log's keys still answer duplicates.
        let again = log
            .append_once(
                kept,
                raw_set_entry("x3"),
                AppendOptions::default(),
                &IdempotencyKey::request("k3"),
            )
            .await
            .expect("append");
        assert!(
            matches!(again, crate::log::AppendOnce::Duplicate { .. }),
            "{again:?}"
        );
    }

    /// A source's snapshot objects stay while a fork that shares them lives, and go once the
    /// fork is deleted and the source's delete is repeated.
    #[tokio::test]
    async fn a_sources_snapshots_stay_while_a_fork_shares_them() {
        let store = Arc::new(MemLogStore::new());
        let objects = Arc::new(MemPayloadStore::new());
        let log =
            EventLog::new(store.clone(), objects.clone(), LogConfig::default()).expect("config");
        let source = log_with_entries(&log, 1).await;
        let fork = log_with_entries(&log, 1).await;
        let chunk = format!("snapshots/{source}/chunks/abc");
        objects.put_marker(&chunk).await.expect("chunk");
        for marker in fork_markers(source, fork) {
            objects.put_marker(&marker).await.expect("marker");
        }
        let first = delete_log(
            &*store,
            &*objects,
            source,
            1,
            Instant::now() + std::time::Duration::from_secs(60),
        )
        .await
        .expect("delete source");
        assert!(first.done && first.kept_for_forks);
        assert!(
            objects.get(&chunk).await.is_ok(),
            "the fork's chunk was deleted"
        );
        let fork_done = delete_log(
            &*store,
            &*objects,
            fork,
            1,
            Instant::now() + std::time::Duration::from_secs(60),
        )
        .await
        .expect("delete fork");
        assert!(fork_done.done && !fork_done.kept_for_forks);
        assert_eq!(
            objects
                .list_keys(&snapshot_prefix(fork), 10)
                .await
                .expect("list"),
            Vec::<String>::new()
        );
        let again = delete_log(
            &*store,
            &*objects,
            source,
            1,
            Instant::now() + std::time::Duration::from_secs(60),
        )
        .await
        .expect("delete source again");
        assert!(again.done && !again.kept_for_forks);
        assert_eq!(
            objects
                .list_keys(&snapshot_prefix(source), 10)
                .await
                .expect("list"),
            Vec::<String>::new()
        );
    }
}

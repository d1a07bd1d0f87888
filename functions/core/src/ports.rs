//! The storage ports: narrow async traits, one per concern, that the log algorithms, the functions
//! and the worker are written against. The AWS adapters in [`crate::aws`] implement them over
//! DynamoDB, S3 and SQS, the stores in `crate::memory` in memory. Each is declared with
//! [`port!`](crate::port), so it works behind an `Arc` and through any layer
//! ([`crate::layer`]): the fault adapter, request counting, test racers.
//!
//! Every method adds the request units it consumed to the `units` accumulator it is given, so an
//! operation can report its cost even when it fails part way.

use bytes::Bytes;

use crate::domain::clients::ClientRange;
use crate::domain::dedupe::{DedupeHit, DedupeKey, DedupeRecord};
use crate::domain::versions::NamedVersion;
use crate::domain::{
    EntryRecord, Guarded, LogId, PendingKey, PendingSnapshot, RequestUnits, SegmentRecord,
};
use crate::error::StoreError;

/// Result of a conditional put of a new entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutOutcome {
    Written,
    /// The entry number was taken. Carries the winner when the store returned it
    /// (`ReturnValuesOnConditionCheckFailure=ALL_OLD`), which saves a re-read.
    Taken(Option<EntryRecord>),
}

/// Result of putting an entry together with its idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnceOutcome {
    /// Both the entry and the key were written.
    Written,
    /// The entry number was taken and the key is new: nothing was written. Carries the item that
    /// holds the number, when the store returned it.
    Taken(Option<EntryRecord>),
    /// The key was already recorded: nothing was written. Carries the first request's seq and
    /// fingerprint, and the item at the number this call tried, when that was taken too.
    Duplicate(DedupeHit, Option<EntryRecord>),
    /// Cancelled by a concurrent request on the same items (`TransactionConflict`).
    Interrupted,
}

/// One client's range item in a `mutations` entry's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangePut {
    pub range: ClientRange,
    /// Also add the client to its group's item (the client's first run on this log).
    pub join_group: bool,
}

/// Most range items one `mutations` entry's transaction carries: with the entry and one group
/// update per range in the worst case, within DynamoDB's 100 items per transaction.
pub const MAX_RANGES_PER_TRANSACTION: usize = 49;

/// Refuses a transaction with no range or more than [`MAX_RANGES_PER_TRANSACTION`].
pub fn check_range_count(ranges: &[RangePut]) -> Result<(), StoreError> {
    if ranges.is_empty() || ranges.len() > MAX_RANGES_PER_TRANSACTION {
        return Err(StoreError::corrupt(
            "a mutations entry",
            format!(
                "{} range items (1 to {MAX_RANGES_PER_TRANSACTION} fit one transaction)",
                ranges.len()
            ),
        ));
    }
    Ok(())
}

/// Result of putting a `mutations` entry together with its client range item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientPutOutcome {
    /// The entry, the range item (and the group membership, if asked) were written.
    Written,
    /// The entry number was taken and the range is free: nothing was written. Carries the item
    /// that holds the number, when the store returned it.
    Taken(Option<EntryRecord>),
    /// A range item with this client and first id exists: another request (or an earlier try of
    /// this one) applied these mutations. Nothing was written.
    RangeTaken,
    /// Cancelled by a concurrent request on the same items (`TransactionConflict`).
    Interrupted,
}

/// Result of a multi-item conditional transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxOutcome {
    Committed,
    /// A condition failed; nothing was written.
    Conflict,
    /// DynamoDB cancelled the transaction because another request touched one of its items at
    /// the same time (`TransactionConflict`); nothing was written, and trying again is right.
    Interrupted,
}

/// One page of entries read in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPage {
    pub entries: Vec<EntryRecord>,
    /// True when the segment may hold more entries after the last one returned.
    pub more: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consistency {
    Eventual,
    Strong,
}

crate::port! {
    /// The Entry and Segment tables: a log's segments and their entries.
    pub trait LogEntries("DynamoDB"): EntriesLayer {
        /// Creates segment 0 and its entry 0 in one transaction; both must not exist.
        async fn create_log(
            &self,
            log: LogId,
            segment: &SegmentRecord,
            first: &EntryRecord,
            units: &mut RequestUnits,
        ) -> Result<TxOutcome, StoreError> as TransactWriteItems;

        /// Up to `limit` segments, newest first.
        async fn newest_segments(
            &self,
            log: LogId,
            limit: u32,
            consistency: Consistency,
            units: &mut RequestUnits,
        ) -> Result<Vec<SegmentRecord>, StoreError> as Query;

        /// One segment, if it exists.
        async fn segment(
            &self,
            log: LogId,
            num: u64,
            consistency: Consistency,
            units: &mut RequestUnits,
        ) -> Result<Option<SegmentRecord>, StoreError> as GetItem;

        /// Every segment of the log in order (paged internally).
        async fn all_segments(
            &self,
            log: LogId,
            units: &mut RequestUnits,
        ) -> Result<Vec<SegmentRecord>, StoreError> as Query;

        /// The entry with the highest number in a segment.
        async fn newest_entry(
            &self,
            log: LogId,
            segment: u64,
            consistency: Consistency,
            units: &mut RequestUnits,
        ) -> Result<Option<EntryRecord>, StoreError> as Query;

        /// Puts an entry on condition that its number is free.
        async fn put_entry(
            &self,
            log: LogId,
            entry: &EntryRecord,
            units: &mut RequestUnits,
        ) -> Result<PutOutcome, StoreError> as PutItem;

        /// One transaction: `end` (End Segment) into the current segment, the new segment item and
        /// its entry 0 (`first`, a Snapshot); each conditional on not existing.
        async fn start_segment(
            &self,
            log: LogId,
            end: &EntryRecord,
            segment: &SegmentRecord,
            first: &EntryRecord,
            units: &mut RequestUnits,
        ) -> Result<TxOutcome, StoreError> as TransactWriteItems;

        /// Entries of one segment with numbers `>= from`, in order, at most `limit`. Follows
        /// `LastEvaluatedKey` across DynamoDB's 1 MB pages until `limit` entries or the segment end.
        async fn read_entries(
            &self,
            log: LogId,
            segment: u64,
            from: u64,
            limit: usize,
            consistency: Consistency,
            units: &mut RequestUnits,
        ) -> Result<EntryPage, StoreError> as Query;

        /// Records the snapshot root on a Snapshot entry (idempotent).
        async fn set_snapshot_root(
            &self,
            log: LogId,
            segment: u64,
            num: u64,
            root: &str,
            units: &mut RequestUnits,
        ) -> Result<(), StoreError> as UpdateItem;

        /// Moves a segment's Last Snapshot forward to `num`; never backwards. Returns false when it
        /// was already at or beyond `num`.
        async fn advance_last_snapshot(
            &self,
            log: LogId,
            segment: u64,
            num: u64,
            units: &mut RequestUnits,
        ) -> Result<bool, StoreError> as UpdateItem;
    }
}

crate::port! {
    /// Sync client runs (`docs/sync.md`): `mutations` entries written together with their
    /// clients' range items in the Clients table, and the queries over those items.
    pub trait ClientRuns("DynamoDB"): ClientRunsLayer {
        /// One transaction: a `mutations` entry, on condition that its number is free, and one
        /// range item per client run it records (each on condition that no range of that client
        /// starts at `range.first`), with group membership when `join_group`: the effects and
        /// every client's last mutation id become visible together. At most
        /// [`MAX_RANGES_PER_TRANSACTION`] ranges.
        async fn put_client_entries(
            &self,
            log: LogId,
            entry: &EntryRecord,
            ranges: &[RangePut],
            units: &mut RequestUnits,
        ) -> Result<ClientPutOutcome, StoreError> as TransactWriteItems;

        /// Up to `limit` range items of a client, newest first, starting from the one with the
        /// highest `first <= at_most` (every range when `None`). Always a strong read.
        async fn client_ranges(
            &self,
            log: LogId,
            client: &str,
            at_most: Option<u64>,
            limit: u32,
            units: &mut RequestUnits,
        ) -> Result<Vec<ClientRange>, StoreError> as Query;

        /// The clients of a client group that have pushed to this log. Always a strong read.
        async fn group_clients(
            &self,
            log: LogId,
            group: &str,
            units: &mut RequestUnits,
        ) -> Result<Vec<String>, StoreError> as GetItem;

        /// The log's index mark: every client run in an entry at or before this sequence has
        /// its range item. `None` when it was never set, which means no entry defers its range
        /// items (the mark is set before the first such entry). Always a strong read.
        async fn index_mark(
            &self,
            log: LogId,
            units: &mut RequestUnits,
        ) -> Result<Option<u64>, StoreError> as GetItem;

        /// Sets the index mark at `at` if it was never set; false when it was.
        async fn start_index_mark(
            &self,
            log: LogId,
            at: u64,
            units: &mut RequestUnits,
        ) -> Result<bool, StoreError> as PutItem;

        /// Moves the index mark forward to `to`; false when it was already there or past it
        /// (or never set).
        async fn advance_index_mark(
            &self,
            log: LogId,
            to: u64,
            units: &mut RequestUnits,
        ) -> Result<bool, StoreError> as UpdateItem;

        /// Adds clients to their group's item (creating it): what a client's first run does
        /// when its range item is written after its entry.
        async fn add_to_group(
            &self,
            log: LogId,
            group: &str,
            clients: &[String],
            units: &mut RequestUnits,
        ) -> Result<(), StoreError> as UpdateItem;

        /// Writes the range items that index one complete window of deferred runs, 25 to a
        /// request, unconditionally: a complete window's entries never change, so everyone who
        /// indexes it writes the same items (`crate::log::deferred`).
        async fn put_deferred_ranges(
            &self,
            log: LogId,
            ranges: &[ClientRange],
            units: &mut RequestUnits,
        ) -> Result<(), StoreError> as BatchWriteItem;
    }
}

crate::port! {
    /// Idempotency keys (the Dedupe table, `docs/storage.md`): an entry written once per key.
    pub trait DedupeKeys("DynamoDB"): DedupeLayer {
        /// One transaction: the entry, on condition that its number is free, and its idempotency key
        /// added to the Dedupe table, on condition that the key is in none of the checked month
        /// columns (aged-out columns are removed in the same write).
        async fn put_entry_once(
            &self,
            log: LogId,
            entry: &EntryRecord,
            seq: u64,
            key: &DedupeRecord,
            units: &mut RequestUnits,
        ) -> Result<OnceOutcome, StoreError> as TransactWriteItems;

        /// Looks a key up in the given month columns of the Dedupe table.
        async fn find_key(
            &self,
            key: &DedupeKey,
            columns: &[String],
            consistency: Consistency,
            units: &mut RequestUnits,
        ) -> Result<Option<DedupeHit>, StoreError> as GetItem;
    }
}

/// Everything the event log's algorithms use of the tables: [`LogEntries`], [`ClientRuns`] and
/// [`DedupeKeys`]. A name for the three together, implemented by every store that has them.
pub trait LogStore: LogEntries + ClientRuns + DedupeKeys {}

impl<T: LogEntries + ClientRuns + DedupeKeys + ?Sized> LogStore for T {}

/// One range item for [`ClientRuns::put_client_entries`] from a single client's run.
pub fn single_range(range: &ClientRange, join_group: bool) -> [RangePut; 1] {
    [RangePut {
        range: range.clone(),
        join_group,
    }]
}

crate::port! {
    /// Who owns each sync client group (`docs/sync.md`, "Client groups belong to their first
    /// pusher"): the subject that first pushed or pulled the group, kept on the group's item in the
    /// Clients table. Ownership never changes once set.
    pub trait GroupOwners("DynamoDB"): GroupOwnersLayer {
        /// The group's owner, after making `subject` its owner if it had none: one strong read when
        /// the group is owned, plus one conditional write the first time.
        async fn claim_group(
            &self,
            log: LogId,
            group: &str,
            subject: &str,
            units: &mut RequestUnits,
        ) -> Result<String, StoreError> as UpdateItem;
    }
}

crate::port! {
    /// A log's named versions (`crate::domain::versions`), in the Clients table.
    pub trait NamedVersions("DynamoDB"): NamedVersionsLayer {
        /// Every named version of the log, by sequence, read strongly.
        async fn list_versions(&self, log: LogId, units: &mut RequestUnits)
            -> Result<Vec<NamedVersion>, StoreError> as Query;
        /// Names version `seq` (or renames it: the name changes, when and by whom it was first
        /// named do not). Answers the version as kept.
        async fn name_version(&self, log: LogId, seq: u64, name: &str, by: Option<&str>,
            now_ms: i64, units: &mut RequestUnits)
            -> Result<NamedVersion, StoreError> as UpdateItem;
        /// Forgets version `seq`'s name; `false` when it had none.
        async fn delete_version(&self, log: LogId, seq: u64, units: &mut RequestUnits)
            -> Result<bool, StoreError> as DeleteItem;
    }
}

crate::port! {
    /// The sync FIFO queue's sending side (`docs/sync.md`, "Queued pushes").
    pub trait PushQueue("SQS"): PushQueueLayer {
        /// Enqueues `body` in message group `group` (the log id) with the deduplication id
        /// `dedupe_id`; a second send with the same id within five minutes is accepted and dropped.
        async fn send(&self, group: &str, dedupe_id: &str, body: String)
            -> Result<(), StoreError> as SendMessage;
    }
}

crate::port! {
    /// Object storage for large entry bodies and uploaded payloads.
    pub trait PayloadStore("S3"): PayloadLayer {
        /// Stores an object tagged for auto-delete: it is discardable until the entry that
        /// references it is committed and the tag removed.
        async fn put_discardable(&self, key: &str, bytes: Bytes)
            -> Result<(), StoreError> as PutObject;
        /// Reads an object; [`StoreError::NotFound`] when it does not exist.
        async fn get(&self, key: &str) -> Result<Bytes, StoreError> as GetObject;
    }
}

crate::port! {
    /// The Pending Snapshots table: one item per snapshot a worker has started and not finished.
    ///
    /// Every write but `create` and `delete` is conditional on the increment the caller last saw
    /// and bumps it, so exactly one of several racing invocations wins a claim, checkpoints only
    /// move forward, and an invocation that was taken over finds its next write refused
    /// ([`Guarded::Lost`]).
    pub trait PendingSnapshots("DynamoDB"): PendingLayer {
        /// The log's first pending snapshot in log order, read consistently: the one that must
        /// finish before any later snapshot of the log may start.
        async fn earliest(&self, log: LogId)
            -> Result<Option<PendingSnapshot>, StoreError> as Query;
        /// Every pending snapshot of a log, in log order.
        async fn list(&self, log: LogId) -> Result<Vec<PendingSnapshot>, StoreError> as Query;
        /// One pending snapshot, read consistently.
        async fn get(&self, key: PendingKey)
            -> Result<Option<PendingSnapshot>, StoreError> as GetItem;
        /// Starts a pending snapshot, active and held by the caller, if none exists.
        async fn create(&self, key: PendingKey, now: i64)
            -> Result<Guarded<PendingSnapshot>, StoreError> as PutItem;
        /// Takes over an item whose holder released it or went quiet (marks it active, bumps
        /// retries), if its increment is still `seen.increment`.
        async fn claim(&self, seen: &PendingSnapshot, now: i64)
            -> Result<Guarded<PendingSnapshot>, StoreError> as UpdateItem;
        /// Records a builder checkpoint (JSON).
        async fn checkpoint(&self, key: PendingKey, increment: u64, state: &str, now: i64)
            -> Result<Guarded<PendingSnapshot>, StoreError> as UpdateItem;
        /// Refreshes `modified` while a long step runs.
        async fn heartbeat(&self, key: PendingKey, increment: u64, now: i64)
            -> Result<Guarded<PendingSnapshot>, StoreError> as UpdateItem;
        /// Clears the active flag (a hand-off, or a wait behind an earlier snapshot).
        async fn release(&self, key: PendingKey, increment: u64, now: i64)
            -> Result<Guarded<PendingSnapshot>, StoreError> as UpdateItem;
        /// Removes the item once the snapshot is complete, if its increment is still `increment`
        /// (another holder's item is left alone: [`Guarded::Lost`]). An item that is already gone
        /// counts as removed, so a retried delete succeeds.
        async fn delete(&self, key: PendingKey, increment: u64)
            -> Result<Guarded<()>, StoreError> as DeleteItem;
    }
}

/// A log's metadata item (the Clients table, key log ‖ `l`): who created it and whether it was
/// deleted (`docs/storage.md`, "Deleting a log").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogMeta {
    /// The proven subject of the caller that created the log (JWT `sub`, IAM ARN), if any.
    pub creator: Option<String>,
    /// When the log was deleted (Unix seconds): the tombstone. Never removed once set.
    pub deleted: Option<i64>,
    /// Who owned the sheet in the catalog when its delete finished (Cognito authorization):
    /// with the creator, who may repeat the delete after the catalog forgot the sheet.
    pub owners: Vec<String>,
}

crate::port! {
    /// Deleting a log's items: the metadata item with its tombstone, and paged removal of every
    /// Entry, Segment, Pending Snapshots and Clients item of the log. Calls are not counted in
    /// request units (a delete reports how many items it removed instead).
    pub trait LogPurge("DynamoDB"): LogPurgeLayer {
        /// The log's metadata item, read strongly; `None` when it has none (a log created without a
        /// proven subject, or one that does not exist).
        async fn log_meta(&self, log: LogId) -> Result<Option<LogMeta>, StoreError> as GetItem;
        /// Records the creator of a log about to be created (the first write wins).
        async fn record_creator(&self, log: LogId, subject: &str)
            -> Result<(), StoreError> as UpdateItem;
        /// Writes the tombstone; a log already marked keeps its first deletion time.
        async fn mark_deleted(&self, log: LogId, now: i64) -> Result<(), StoreError> as UpdateItem;
        /// Adds `owners` to the tombstone's former owners (a log with a tombstone only).
        async fn record_owners(&self, log: LogId, owners: &[String])
            -> Result<(), StoreError> as UpdateItem;
        /// Counts one delete by `subject` in the fixed window that started at `window` (Unix
        /// seconds): `false`, counting nothing, when `limit` deletes are counted in it already.
        async fn count_delete(&self, subject: &str, window: i64, limit: u32)
            -> Result<bool, StoreError> as UpdateItem;
        /// Whether the log has any segment (whether it exists, for a log with no tombstone).
        async fn has_segments(&self, log: LogId) -> Result<bool, StoreError> as Query;
        /// Deletes up to about `max` of the log's items, never its metadata item: entries first
        /// (segment by segment), then pending snapshots, client items and last the Segment items,
        /// so a purge cut off at any point can be resumed by calling again. Returns how many items
        /// it deleted; 0 means none is left.
        async fn purge_items(&self, log: LogId, max: usize)
            -> Result<usize, StoreError> as BatchWriteItem;
    }
}

crate::port! {
    /// Listing and deleting objects, for a log's delete.
    pub trait ObjectPurge("S3"): ObjectPurgeLayer {
        /// Up to `max` keys that start with `prefix`, in key order.
        async fn list_keys(&self, prefix: &str, max: usize)
            -> Result<Vec<String>, StoreError> as ListObjectsV2;
        /// Deletes the objects (missing ones count as deleted).
        async fn delete_keys(&self, keys: &[String]) -> Result<(), StoreError> as DeleteObjects;
        /// Writes an empty, untagged marker object.
        async fn put_marker(&self, key: &str) -> Result<(), StoreError> as PutObject;
    }
}

#[cfg(feature = "engine")]
pub use blobs::BlobLayer;

/// The snapshot engine's [`BlobStore`](sheetlog_sheet::snapshot::BlobStore), declared in
/// `sheetlog-sheet` (which knows nothing of layers), under the same layers as the ports above. A
/// [`StoreError`] a layer returns (an injected throttle) becomes the [`BlobError`]'s source.
///
/// [`BlobError`]: sheetlog_sheet::snapshot::BlobError
#[cfg(feature = "engine")]
mod blobs {
    use bytes::Bytes;
    use sheetlog_sheet::snapshot::{BlobError, BlobParts, BlobStore};

    use crate::error::StoreError;

    crate::port! {
        impl BlobStore("S3"): BlobLayer {
            async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> as PutObject;
            async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> as GetObject;
            async fn exists(&self, key: &str) -> Result<bool, BlobError> as HeadObject;
            async fn put_if_absent(&self, key: &str, bytes: Bytes)
                -> Result<bool, BlobError> as PutObject;
            async fn put_parts(&self, key: &str, parts: &mut dyn BlobParts)
                -> Result<(), BlobError> as CreateMultipartUpload;
        }
    }

    impl From<StoreError> for BlobError {
        fn from(e: StoreError) -> Self {
            let op = match &e {
                StoreError::Service { operation, .. }
                | StoreError::Throttled { operation, .. }
                | StoreError::TimedOut { operation, .. } => *operation,
                StoreError::Corrupt { .. } => "read",
                StoreError::NotFound { .. } | StoreError::TooLarge { .. } => "get",
            };
            BlobError::new(op, "", e)
        }
    }
}

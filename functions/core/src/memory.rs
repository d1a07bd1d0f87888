//! In-memory stores behind the same ports as the AWS adapters: the Entry and Segment tables
//! ([`MemLogStore`]), payload objects ([`MemPayloadStore`]) and the Pending Snapshots table
//! ([`MemPendingStore`]). They keep the conditions the adapters rely on (put if absent,
//! all-or-nothing transactions, increment-guarded updates) and are strongly consistent, so
//! protocol tests run in milliseconds; the adapters themselves are tested against the emulator.
//!
//! Request units are charged with the same rules as the DynamoDB adapter, on the size of the item
//! the adapter would write, so costs measured here match.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;

use crate::aws::items::{
    client_range_to_item, dedupe_hit, dedupe_item, entry_to_item, group_item, item_size,
    segment_to_item,
};
use crate::domain::clients::ClientRange;
use crate::domain::cost::{ReadConsistency, read_units, write_units};
use crate::domain::dedupe::{DedupeHit, DedupeKey, DedupeRecord, DedupeRef};
use crate::domain::{
    EntryRecord, EntryType, Guarded, LogId, PendingKey, PendingSnapshot, RequestUnits,
    SegmentRecord,
};
use crate::error::StoreError;
use crate::ports::{
    ClientPutOutcome, Consistency, EntryPage, GroupOwners, LogStore, OnceOutcome, PayloadStore,
    PendingSnapshots, PutOutcome, RangePut, TxOutcome, check_range_count,
};

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, StoreError> {
    m.lock()
        .map_err(|_| StoreError::corrupt("in-memory store", "lock poisoned by a panic"))
}

fn read_cost(bytes: u64, consistency: Consistency) -> RequestUnits {
    RequestUnits::reads(read_units(
        bytes,
        match consistency {
            Consistency::Eventual => ReadConsistency::Eventual,
            Consistency::Strong => ReadConsistency::Strong,
        },
    ))
}

#[derive(Debug, Default)]
struct Tables {
    segments: BTreeMap<(LogId, u64), SegmentRecord>,
    entries: BTreeMap<(LogId, u64, u64), EntryRecord>,
    /// Dedupe items: prefix → month column → set elements.
    dedupe: BTreeMap<Vec<u8>, BTreeMap<String, BTreeSet<Vec<u8>>>>,
    /// The Entry items' `k` attribute: where an entry's idempotency key sits in `dedupe`.
    entry_keys: BTreeMap<(LogId, u64, u64), DedupeRef>,
    /// Client range items by (log, client, first id).
    ranges: BTreeMap<(LogId, String, u64), ClientRange>,
    /// Client group items: (log, group) → clients.
    groups: BTreeMap<(LogId, String), BTreeSet<String>>,
    /// Client group owners: (log, group) → subject.
    owners: BTreeMap<(LogId, String), String>,
    /// Log metadata items (creator, tombstone).
    meta: BTreeMap<LogId, crate::ports::LogMeta>,
}

/// The Entry and Segment tables in memory.
#[derive(Debug, Default)]
pub struct MemLogStore {
    tables: Mutex<Tables>,
}

impl MemLogStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a segment's Archive attribute if unset or already `key` (as
    /// `DynamoLogStore::set_archive`).
    pub fn set_archive(&self, log: LogId, segment: u64, key: &str) -> Result<bool, StoreError> {
        let mut t = lock(&self.tables)?;
        match t.segments.get_mut(&(log, segment)) {
            Some(s) if s.archive.as_deref().is_none_or(|a| a == key) => {
                s.archive = Some(key.to_owned());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Deletes entry items (as `DynamoLogStore::delete_entries`).
    pub fn delete_entries(&self, log: LogId, segment: u64, nums: &[u64]) -> Result<(), StoreError> {
        let mut t = lock(&self.tables)?;
        for n in nums {
            t.entries.remove(&(log, segment, *n));
            t.entry_keys.remove(&(log, segment, *n));
        }
        Ok(())
    }

    /// Every entry of a log in (segment, number) order (for assertions).
    pub fn entries(&self, log: LogId) -> Result<Vec<EntryRecord>, StoreError> {
        Ok(lock(&self.tables)?
            .entries
            .range((log, 0, 0)..=(log, u64::MAX, u64::MAX))
            .map(|(_, e)| e.clone())
            .collect())
    }

    /// A Dedupe item as the DynamoDB adapter would store it (for assertions and size checks).
    pub fn dedupe_item(
        &self,
        prefix: &[u8],
    ) -> Result<Option<crate::aws::items::Item>, StoreError> {
        let t = lock(&self.tables)?;
        Ok(t.dedupe.get(prefix).map(|cols| dedupe_item(prefix, cols)))
    }

    fn entry_cost(log: LogId, e: &EntryRecord) -> u64 {
        item_size(&entry_to_item(log, e))
    }

    fn segment_cost(log: LogId, s: &SegmentRecord) -> u64 {
        item_size(&segment_to_item(log, s))
    }

    /// Puts every item if none exists yet; transactions are charged two write units per KB
    /// whether or not they commit, as DynamoDB does.
    fn transact(
        &self,
        log: LogId,
        segment: &SegmentRecord,
        entries: &[&EntryRecord],
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        *units += RequestUnits::writes(write_units(Self::segment_cost(log, segment), true));
        for e in entries {
            *units += RequestUnits::writes(write_units(Self::entry_cost(log, e), true));
        }
        let mut t = lock(&self.tables)?;
        if t.segments.contains_key(&(log, segment.num))
            || entries
                .iter()
                .any(|e| t.entries.contains_key(&(log, e.segment, e.num)))
        {
            return Ok(TxOutcome::Conflict);
        }
        t.segments.insert((log, segment.num), segment.clone());
        for e in entries {
            t.entries.insert((log, e.segment, e.num), (*e).clone());
        }
        Ok(TxOutcome::Committed)
    }
}

#[async_trait]
impl GroupOwners for MemLogStore {
    async fn claim_group(
        &self,
        log: LogId,
        group: &str,
        subject: &str,
        units: &mut RequestUnits,
    ) -> Result<String, StoreError> {
        let mut t = lock(&self.tables)?;
        *units += RequestUnits::reads(read_units(1024, ReadConsistency::Strong));
        let owner = t
            .owners
            .entry((log, group.to_owned()))
            .or_insert_with(|| subject.to_owned());
        Ok(owner.clone())
    }
}

#[async_trait]
impl LogStore for MemLogStore {
    async fn create_log(
        &self,
        log: LogId,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        self.transact(log, segment, &[first], units)
    }

    async fn newest_segments(
        &self,
        log: LogId,
        limit: u32,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        let t = lock(&self.tables)?;
        let out: Vec<SegmentRecord> = t
            .segments
            .range((log, 0)..=(log, u64::MAX))
            .rev()
            .take(limit as usize)
            .map(|(_, s)| s.clone())
            .collect();
        let bytes = out.iter().map(|s| Self::segment_cost(log, s)).sum();
        *units += read_cost(bytes, consistency);
        Ok(out)
    }

    async fn segment(
        &self,
        log: LogId,
        num: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<SegmentRecord>, StoreError> {
        let found = lock(&self.tables)?.segments.get(&(log, num)).cloned();
        let bytes = found
            .as_ref()
            .map(|s| Self::segment_cost(log, s))
            .unwrap_or(0);
        *units += read_cost(bytes, consistency);
        Ok(found)
    }

    async fn all_segments(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        let out: Vec<SegmentRecord> = lock(&self.tables)?
            .segments
            .range((log, 0)..=(log, u64::MAX))
            .map(|(_, s)| s.clone())
            .collect();
        let bytes = out.iter().map(|s| Self::segment_cost(log, s)).sum();
        *units += read_cost(bytes, Consistency::Eventual);
        Ok(out)
    }

    async fn newest_entry(
        &self,
        log: LogId,
        segment: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<EntryRecord>, StoreError> {
        let found = lock(&self.tables)?
            .entries
            .range((log, segment, 0)..=(log, segment, u64::MAX))
            .next_back()
            .map(|(_, e)| e.clone());
        let bytes = found
            .as_ref()
            .map(|e| Self::entry_cost(log, e))
            .unwrap_or(0);
        *units += read_cost(bytes, consistency);
        Ok(found)
    }

    async fn put_entry(
        &self,
        log: LogId,
        entry: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<PutOutcome, StoreError> {
        let size = Self::entry_cost(log, entry);
        let mut t = lock(&self.tables)?;
        match t.entries.get(&(log, entry.segment, entry.num)) {
            Some(old) => {
                // A refused conditional write is billed at the larger of the two items.
                let old_size = Self::entry_cost(log, old);
                *units += RequestUnits::writes(write_units(size.max(old_size), false));
                Ok(PutOutcome::Taken(Some(old.clone())))
            }
            None => {
                *units += RequestUnits::writes(write_units(size, false));
                t.entries
                    .insert((log, entry.segment, entry.num), entry.clone());
                Ok(PutOutcome::Written)
            }
        }
    }

    async fn put_client_entries(
        &self,
        log: LogId,
        entry: &EntryRecord,
        ranges: &[RangePut],
        units: &mut RequestUnits,
    ) -> Result<ClientPutOutcome, StoreError> {
        check_range_count(ranges)?;
        let mut t = lock(&self.tables)?;
        let taken = t.entries.get(&(log, entry.segment, entry.num)).cloned();
        let entry_size = Self::entry_cost(log, entry).max(
            taken
                .as_ref()
                .map(|old| Self::entry_cost(log, old))
                .unwrap_or(0),
        );
        *units += RequestUnits::writes(write_units(entry_size, true));
        let mut groups: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for put in ranges {
            let range = &put.range;
            *units += RequestUnits::writes(write_units(
                item_size(&client_range_to_item(log, range)),
                true,
            ));
            if put.join_group {
                let members = match groups.entry(range.group.clone()) {
                    std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                    std::collections::btree_map::Entry::Vacant(v) => v.insert(
                        t.groups
                            .get(&(log, range.group.clone()))
                            .cloned()
                            .unwrap_or_default(),
                    ),
                };
                members.insert(range.client.clone());
            }
        }
        // One update per group item, however many of its clients join.
        for (group, members) in &groups {
            let before = t
                .groups
                .get(&(log, group.clone()))
                .map(|m| {
                    item_size(&group_item(
                        log,
                        group,
                        &m.iter().cloned().collect::<Vec<_>>(),
                    ))
                })
                .unwrap_or(0);
            let after = item_size(&group_item(
                log,
                group,
                &members.iter().cloned().collect::<Vec<_>>(),
            ));
            *units += RequestUnits::writes(write_units(before.max(after), true));
        }
        if ranges.iter().any(|p| {
            t.ranges
                .contains_key(&(log, p.range.client.clone(), p.range.key))
        }) {
            return Ok(ClientPutOutcome::RangeTaken);
        }
        if taken.is_some() {
            return Ok(ClientPutOutcome::Taken(taken));
        }
        t.entries
            .insert((log, entry.segment, entry.num), entry.clone());
        for put in ranges {
            let r = &put.range;
            t.ranges.insert((log, r.client.clone(), r.key), r.clone());
        }
        for (group, members) in groups {
            t.groups.insert((log, group), members);
        }
        Ok(ClientPutOutcome::Written)
    }

    async fn client_ranges(
        &self,
        log: LogId,
        client: &str,
        at_most: Option<u64>,
        limit: u32,
        units: &mut RequestUnits,
    ) -> Result<Vec<ClientRange>, StoreError> {
        let t = lock(&self.tables)?;
        let lo = (log, client.to_owned(), 0);
        let hi = (log, client.to_owned(), at_most.unwrap_or(u64::MAX));
        let found: Vec<ClientRange> = t
            .ranges
            .range(lo..=hi)
            .rev()
            .take(limit as usize)
            .map(|(_, r)| r.clone())
            .collect();
        let bytes = found
            .iter()
            .map(|r| item_size(&client_range_to_item(log, r)))
            .sum();
        *units += read_cost(bytes, Consistency::Strong);
        Ok(found)
    }

    async fn group_clients(
        &self,
        log: LogId,
        group: &str,
        units: &mut RequestUnits,
    ) -> Result<Vec<String>, StoreError> {
        let t = lock(&self.tables)?;
        let clients: Vec<String> = t
            .groups
            .get(&(log, group.to_owned()))
            .map(|m| m.iter().cloned().collect())
            .unwrap_or_default();
        *units += read_cost(
            item_size(&group_item(log, group, &clients)),
            Consistency::Strong,
        );
        Ok(clients)
    }

    async fn put_entry_once(
        &self,
        log: LogId,
        entry: &EntryRecord,
        seq: u64,
        key: &DedupeRecord,
        units: &mut RequestUnits,
    ) -> Result<OnceOutcome, StoreError> {
        let mut t = lock(&self.tables)?;
        let prefix = &key.key.prefix;
        let cols = &key.columns;
        let before = t.dedupe.get(prefix).cloned().unwrap_or_default();
        let before_item = dedupe_item(prefix, &before);
        let hit = dedupe_hit(&before_item, &key.key.suffix, &cols.checked);
        let bare = key.key.suffix.to_vec();
        let dup_marker = cols
            .checked
            .iter()
            .any(|c| before.get(c).is_some_and(|set| set.contains(&bare)));
        let taken = t.entries.get(&(log, entry.segment, entry.num)).cloned();
        // Both items are charged at two units per KB, at the larger of old and new.
        let mut after = before.clone();
        for c in &cols.removed {
            after.remove(c);
        }
        let [bare_el, value_el] = key.elements(seq);
        let set = after.entry(cols.current.clone()).or_default();
        set.insert(bare_el);
        set.insert(value_el);
        // The `k` attribute the DynamoDB adapter adds to the item: name and value.
        let entry_ref = key.entry_ref();
        let ref_bytes = entry_ref
            .as_ref()
            .map_or(0, |r| 1 + r.encode().len() as u64);
        let entry_size = (Self::entry_cost(log, entry) + ref_bytes).max(
            taken
                .as_ref()
                .map(|old| Self::entry_cost(log, old))
                .unwrap_or(0),
        );
        let dedupe_size = item_size(&before_item).max(item_size(&dedupe_item(prefix, &after)));
        *units += RequestUnits::writes(write_units(entry_size, true));
        *units += RequestUnits::writes(write_units(dedupe_size, true));
        if dup_marker {
            let hit = hit.ok_or_else(|| {
                StoreError::corrupt("in-memory Dedupe item", "marker without a value")
            })?;
            return Ok(OnceOutcome::Duplicate(hit, taken));
        }
        if taken.is_some() {
            return Ok(OnceOutcome::Taken(taken));
        }
        t.entries
            .insert((log, entry.segment, entry.num), entry.clone());
        if let Some(r) = entry_ref {
            t.entry_keys.insert((log, entry.segment, entry.num), r);
        }
        t.dedupe.insert(prefix.clone(), after);
        Ok(OnceOutcome::Written)
    }

    async fn find_key(
        &self,
        key: &DedupeKey,
        columns: &[String],
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<DedupeHit>, StoreError> {
        let t = lock(&self.tables)?;
        let item = t
            .dedupe
            .get(&key.prefix)
            .map(|c| dedupe_item(&key.prefix, c));
        *units += read_cost(item.as_ref().map(item_size).unwrap_or(0), consistency);
        Ok(item.and_then(|i| dedupe_hit(&i, &key.suffix, columns)))
    }

    async fn start_segment(
        &self,
        log: LogId,
        end: &EntryRecord,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        self.transact(log, segment, &[end, first], units)
    }

    async fn read_entries(
        &self,
        log: LogId,
        segment: u64,
        from: u64,
        limit: usize,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<EntryPage, StoreError> {
        let t = lock(&self.tables)?;
        let mut range = t
            .entries
            .range((log, segment, from)..=(log, segment, u64::MAX));
        let entries: Vec<EntryRecord> =
            range.by_ref().take(limit).map(|(_, e)| e.clone()).collect();
        let more = entries.len() == limit && range.next().is_some();
        let bytes = entries.iter().map(|e| Self::entry_cost(log, e)).sum();
        *units += read_cost(bytes, consistency);
        Ok(EntryPage { entries, more })
    }

    async fn set_snapshot_root(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        root: &str,
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        *units += RequestUnits::writes(1.0);
        let mut t = lock(&self.tables)?;
        match t.entries.get_mut(&(log, segment, num)) {
            Some(e) if e.kind == EntryType::SNAPSHOT => {
                e.snapshot_root = Some(root.to_owned());
                Ok(())
            }
            _ => Err(StoreError::corrupt(
                "Entry item",
                format!("segment {segment} entry {num} is not a Snapshot entry"),
            )),
        }
    }

    async fn advance_last_snapshot(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        *units += RequestUnits::writes(1.0);
        let mut t = lock(&self.tables)?;
        match t.segments.get_mut(&(log, segment)) {
            Some(s) if s.last_snapshot.is_none_or(|l| l < num) => {
                s.last_snapshot = Some(num);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The Pending Snapshots table is a separate store here ([`MemPendingStore`]); this purge covers
/// the tables `MemLogStore` holds.
#[async_trait]
impl crate::ports::LogPurge for MemLogStore {
    async fn log_meta(&self, log: LogId) -> Result<Option<crate::ports::LogMeta>, StoreError> {
        Ok(lock(&self.tables)?.meta.get(&log).cloned())
    }

    async fn record_creator(&self, log: LogId, subject: &str) -> Result<(), StoreError> {
        let mut t = lock(&self.tables)?;
        let meta = t.meta.entry(log).or_default();
        if meta.creator.is_none() {
            meta.creator = Some(subject.to_owned());
        }
        Ok(())
    }

    async fn mark_deleted(&self, log: LogId, now: i64) -> Result<(), StoreError> {
        let mut t = lock(&self.tables)?;
        let meta = t.meta.entry(log).or_default();
        meta.deleted.get_or_insert(now);
        Ok(())
    }

    async fn has_segments(&self, log: LogId) -> Result<bool, StoreError> {
        Ok(lock(&self.tables)?
            .segments
            .range((log, 0)..=(log, u64::MAX))
            .next()
            .is_some())
    }

    async fn purge_items(&self, log: LogId, max: usize) -> Result<usize, StoreError> {
        let max = max.max(1);
        let mut t = lock(&self.tables)?;
        let entries: Vec<_> = t
            .entries
            .range((log, 0, 0)..=(log, u64::MAX, u64::MAX))
            .map(|(k, _)| *k)
            .take(max)
            .collect();
        let mut deleted = entries.len();
        for k in entries {
            // The entry's idempotency key first, as the DynamoDB purge does.
            if let Some(r) = t.entry_keys.remove(&k) {
                let base = t.segments.get(&(k.0, k.1)).map_or(0, |s| s.base_seq);
                let column = r.column();
                if let Some(cols) = t.dedupe.get_mut(&r.prefix) {
                    if let Some(set) = cols.get_mut(&column) {
                        for e in r.elements(base + k.2) {
                            set.remove(&e);
                        }
                        if set.is_empty() {
                            cols.remove(&column);
                        }
                    }
                    if cols.is_empty() {
                        t.dedupe.remove(&r.prefix);
                    }
                }
            }
            t.entries.remove(&k);
        }
        let ranges: Vec<_> = t
            .ranges
            .keys()
            .filter(|k| k.0 == log)
            .take(max - deleted)
            .cloned()
            .collect();
        deleted += ranges.len();
        for k in ranges {
            t.ranges.remove(&k);
        }
        let groups: Vec<_> = t
            .groups
            .keys()
            .filter(|k| k.0 == log)
            .take(max - deleted)
            .cloned()
            .collect();
        deleted += groups.len();
        for k in groups {
            t.groups.remove(&k);
        }
        if t.entries
            .range((log, 0, 0)..=(log, u64::MAX, u64::MAX))
            .next()
            .is_none()
        {
            let segments: Vec<_> = t
                .segments
                .range((log, 0)..=(log, u64::MAX))
                .map(|(k, _)| *k)
                .take(max - deleted)
                .collect();
            deleted += segments.len();
            for k in segments {
                t.segments.remove(&k);
            }
        }
        Ok(deleted)
    }
}

/// Payload objects in memory, with their auto-delete mark.
#[derive(Debug, Default)]
pub struct MemPayloadStore {
    objects: Mutex<BTreeMap<String, (Bytes, bool)>>,
}

impl MemPayloadStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the object is still marked discardable; `None` when it does not exist.
    pub fn is_discardable(&self, key: &str) -> Option<bool> {
        self.objects.lock().ok()?.get(key).map(|(_, d)| *d)
    }
}

#[async_trait]
impl crate::ports::ObjectPurge for MemPayloadStore {
    async fn list_keys(&self, prefix: &str, max: usize) -> Result<Vec<String>, StoreError> {
        Ok(lock(&self.objects)?
            .range(prefix.to_owned()..)
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(prefix))
            .take(max)
            .cloned()
            .collect())
    }

    async fn delete_keys(&self, keys: &[String]) -> Result<(), StoreError> {
        let mut objects = lock(&self.objects)?;
        for k in keys {
            objects.remove(k);
        }
        Ok(())
    }

    async fn put_marker(&self, key: &str) -> Result<(), StoreError> {
        lock(&self.objects)?.insert(key.to_owned(), (Bytes::new(), false));
        Ok(())
    }
}

#[async_trait]
impl PayloadStore for MemPayloadStore {
    async fn put_discardable(&self, key: &str, bytes: Bytes) -> Result<(), StoreError> {
        lock(&self.objects)?.insert(key.to_owned(), (bytes, true));
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Bytes, StoreError> {
        lock(&self.objects)?
            .get(key)
            .map(|(b, _)| b.clone())
            .ok_or_else(|| StoreError::not_found(key))
    }
}

/// The Pending Snapshots table in memory, with the same increment guard as the DynamoDB adapter.
#[derive(Debug, Default)]
pub struct MemPendingStore {
    items: Mutex<BTreeMap<PendingKey, PendingSnapshot>>,
}

impl MemPendingStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `change` to the item if its increment is still `seen`, then bumps the increment
    /// and `modified`, as every guarded write does.
    fn guarded(
        &self,
        key: PendingKey,
        seen: u64,
        now: i64,
        change: impl FnOnce(&mut PendingSnapshot),
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        let mut items = lock(&self.items)?;
        match items.get_mut(&key) {
            Some(p) if p.increment == seen => {
                change(p);
                p.modified = now;
                p.increment += 1;
                Ok(Guarded::Done(p.clone()))
            }
            _ => Ok(Guarded::Lost),
        }
    }
}

#[async_trait]
impl PendingSnapshots for MemPendingStore {
    async fn earliest(&self, log: LogId) -> Result<Option<PendingSnapshot>, StoreError> {
        Ok(self.list(log).await?.into_iter().next())
    }

    async fn list(&self, log: LogId) -> Result<Vec<PendingSnapshot>, StoreError> {
        let from = PendingKey::new(log, 0, 0);
        let to = PendingKey::new(log, u64::MAX, u64::MAX);
        Ok(lock(&self.items)?
            .range(from..=to)
            .map(|(_, p)| p.clone())
            .collect())
    }

    async fn get(&self, key: PendingKey) -> Result<Option<PendingSnapshot>, StoreError> {
        Ok(lock(&self.items)?.get(&key).cloned())
    }

    async fn create(
        &self,
        key: PendingKey,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        let mut items = lock(&self.items)?;
        if items.contains_key(&key) {
            return Ok(Guarded::Lost);
        }
        let p = PendingSnapshot {
            key,
            created: now,
            modified: now,
            active: true,
            increment: 0,
            retries: 0,
            state: None,
        };
        items.insert(key, p.clone());
        Ok(Guarded::Done(p))
    }

    async fn claim(
        &self,
        seen: &PendingSnapshot,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded(seen.key, seen.increment, now, |p| {
            p.active = true;
            p.retries += 1;
        })
    }

    async fn checkpoint(
        &self,
        key: PendingKey,
        increment: u64,
        state: &str,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded(key, increment, now, |p| p.state = Some(state.to_owned()))
    }

    async fn heartbeat(
        &self,
        key: PendingKey,
        increment: u64,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded(key, increment, now, |_| {})
    }

    async fn release(
        &self,
        key: PendingKey,
        increment: u64,
        now: i64,
    ) -> Result<Guarded<PendingSnapshot>, StoreError> {
        self.guarded(key, increment, now, |p| p.active = false)
    }

    async fn delete(&self, key: PendingKey, increment: u64) -> Result<Guarded<()>, StoreError> {
        let mut items = lock(&self.items)?;
        match items.get(&key) {
            Some(p) if p.increment != increment => Ok(Guarded::Lost),
            _ => {
                items.remove(&key);
                Ok(Guarded::Done(()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::domain::NewEntry;
    use crate::log::{AppendOptions, EventLog};

    fn log() -> EventLog<MemLogStore, MemPayloadStore> {
        EventLog::new(
            MemLogStore::new(),
            MemPayloadStore::new(),
            LogConfig::default(),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn the_log_algorithms_run_on_the_memory_store() {
        let log = log();
        let id = log.create().await.unwrap().log;
        for i in 0..5u8 {
            let e = NewEntry::new(EntryType(16), 1, vec![i; 8]);
            let out = log.append(id, e, AppendOptions::default()).await.unwrap();
            assert_eq!(out.seq, u64::from(i) + 1);
        }
        let page = log.read_since(id, 0, 100).await.unwrap();
        assert_eq!(page.entries.len(), 6);
        assert!(
            page.entries
                .iter()
                .enumerate()
                .all(|(i, e)| e.seq == i as u64)
        );
    }

    #[tokio::test]
    async fn a_taken_entry_number_is_refused_and_returns_the_winner() {
        let store = MemLogStore::new();
        let id = LogId::new_random();
        let rec = |body: &'static [u8]| EntryRecord {
            segment: 0,
            num: 1,
            created: 0,
            kind: EntryType(16),
            version: 1,
            body: Some(Bytes::from_static(body)),
            external: None,
            snapshot_root: None,
            attempt: None,
        };
        let mut units = RequestUnits::default();
        let first = store.put_entry(id, &rec(b"a"), &mut units).await.unwrap();
        assert_eq!(first, PutOutcome::Written);
        let second = store.put_entry(id, &rec(b"b"), &mut units).await.unwrap();
        assert_eq!(second, PutOutcome::Taken(Some(rec(b"a"))));
        assert_eq!(units.write, 2.0);
    }

    #[tokio::test]
    async fn pending_writes_are_guarded_by_the_increment() {
        let store = MemPendingStore::new();
        let key = PendingKey::new(LogId::new_random(), 0, 100);
        let Guarded::Done(p) = store.create(key, 10).await.unwrap() else {
            panic!("first create must win")
        };
        assert_eq!(store.create(key, 11).await.unwrap(), Guarded::Lost);
        let Guarded::Done(claimed) = store.claim(&p, 12).await.unwrap() else {
            panic!("claim with the current increment must win")
        };
        assert_eq!((claimed.increment, claimed.retries), (1, 1));
        // The stale holder's checkpoint is refused.
        assert_eq!(
            store.checkpoint(key, 0, "{}", 13).await.unwrap(),
            Guarded::Lost
        );
        let Guarded::Done(c) = store.checkpoint(key, 1, "{}", 13).await.unwrap() else {
            panic!("the holder's checkpoint must land")
        };
        assert_eq!(c.state.as_deref(), Some("{}"));
        assert_eq!(store.earliest(key.log).await.unwrap(), Some(c));
    }
}

/// One message on the in-memory push queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    pub group: String,
    pub dedupe_id: String,
    pub body: String,
}

/// An in-memory FIFO push queue: messages in send order, a repeated deduplication id dropped
/// (SQS drops it within five minutes; here for the queue's life).
#[derive(Debug, Default)]
pub struct MemPushQueue {
    inner: Mutex<(Vec<QueuedMessage>, BTreeSet<String>)>,
}

impl MemPushQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes every message sent so far, in order.
    pub fn take(&self) -> Vec<QueuedMessage> {
        lock(&self.inner)
            .map(|mut q| std::mem::take(&mut q.0))
            .unwrap_or_default()
    }
}

#[async_trait]
impl crate::ports::PushQueue for MemPushQueue {
    async fn send(&self, group: &str, dedupe_id: &str, body: String) -> Result<(), StoreError> {
        let mut q = lock(&self.inner)?;
        if q.1.insert(dedupe_id.to_owned()) {
            q.0.push(QueuedMessage {
                group: group.to_owned(),
                dedupe_id: dedupe_id.to_owned(),
                body,
            });
        }
        Ok(())
    }
}

//! In-memory stores behind the same ports as the AWS adapters: the Entry and Segment tables
//! ([`MemLogStore`]), payload objects ([`MemPayloadStore`], `objects.rs`), the Pending Snapshots
//! table ([`MemPendingStore`], `pending.rs`), the sync FIFO queue (`queue.rs`) and the catalog
//! (`catalog.rs`). They keep the conditions the adapters rely on (put if absent,
//! all-or-nothing transactions, increment-guarded updates) and are strongly consistent, so
//! protocol tests run in milliseconds; the adapters themselves are tested against the emulator.
//!
//! Request units are charged with the same rules as the DynamoDB adapter, on the size of the item
//! the adapter would write, so costs measured here match.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use crate::aws::items::{
    client_range_to_item, dedupe_hit, dedupe_item, entry_to_item, group_item, item_size,
    segment_to_item,
};
use crate::domain::clients::ClientRange;
use crate::domain::cost::{ReadConsistency, read_units, write_units};
use crate::domain::dedupe::{DedupeHit, DedupeKey, DedupeRecord, DedupeRef};
use crate::domain::{EntryRecord, EntryType, LogId, RequestUnits, SegmentRecord};
use crate::error::StoreError;
use crate::ports::{
    ClientPutOutcome, ClientRuns, Consistency, DedupeKeys, EntryPage, GroupOwners, LogEntries,
    OnceOutcome, PutOutcome, RangePut, TxOutcome, check_range_count,
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

/// The index mark item's size: its key (17 bytes and the sort key) and one number.
const MARK_ITEM_BYTES: u64 = 30;

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
    /// Index marks: log → sequence.
    marks: BTreeMap<LogId, u64>,
    /// Log metadata items (creator, tombstone).
    meta: BTreeMap<LogId, crate::ports::LogMeta>,
    /// Deletes counted per subject: (window start, count).
    delete_counts: BTreeMap<String, (i64, u32)>,
    /// Named versions by (log, sequence).
    versions: BTreeMap<(LogId, u64), crate::domain::versions::NamedVersion>,
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
impl crate::ports::NamedVersions for MemLogStore {
    async fn list_versions(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Vec<crate::domain::versions::NamedVersion>, StoreError> {
        let t = lock(&self.tables)?;
        *units += RequestUnits::reads(read_units(1024, ReadConsistency::Strong));
        Ok(t.versions
            .range((log, 0)..=(log, u64::MAX))
            .map(|(_, v)| v.clone())
            .collect())
    }

    async fn name_version(
        &self,
        log: LogId,
        seq: u64,
        name: &str,
        by: Option<&str>,
        now_ms: i64,
        units: &mut RequestUnits,
    ) -> Result<crate::domain::versions::NamedVersion, StoreError> {
        let mut t = lock(&self.tables)?;
        *units += RequestUnits::writes(write_units(1024, false));
        let v =
            t.versions
                .entry((log, seq))
                .or_insert_with(|| crate::domain::versions::NamedVersion {
                    seq,
                    name: String::new(),
                    created_at: now_ms,
                    by: by.map(str::to_owned),
                });
        v.name = name.to_owned();
        Ok(v.clone())
    }

    async fn delete_version(
        &self,
        log: LogId,
        seq: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        let mut t = lock(&self.tables)?;
        *units += RequestUnits::writes(write_units(1024, false));
        Ok(t.versions.remove(&(log, seq)).is_some())
    }
}

#[async_trait]
impl LogEntries for MemLogStore {
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

#[async_trait]
impl ClientRuns for MemLogStore {
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
    async fn index_mark(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Option<u64>, StoreError> {
        let t = lock(&self.tables)?;
        let mark = t.marks.get(&log).copied();
        *units += read_cost(
            if mark.is_some() { MARK_ITEM_BYTES } else { 0 },
            Consistency::Strong,
        );
        Ok(mark)
    }
    async fn start_index_mark(
        &self,
        log: LogId,
        at: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        let mut t = lock(&self.tables)?;
        *units += RequestUnits::writes(write_units(MARK_ITEM_BYTES, false));
        if t.marks.contains_key(&log) {
            return Ok(false);
        }
        t.marks.insert(log, at);
        Ok(true)
    }
    async fn advance_index_mark(
        &self,
        log: LogId,
        to: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        let mut t = lock(&self.tables)?;
        *units += RequestUnits::writes(write_units(MARK_ITEM_BYTES, false));
        match t.marks.get_mut(&log) {
            Some(w) if *w < to => {
                *w = to;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
    async fn add_to_group(
        &self,
        log: LogId,
        group: &str,
        clients: &[String],
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        if clients.is_empty() {
            return Ok(());
        }
        let mut t = lock(&self.tables)?;
        let members = t.groups.entry((log, group.to_owned())).or_default();
        members.extend(clients.iter().cloned());
        let all: Vec<String> = members.iter().cloned().collect();
        *units +=
            RequestUnits::writes(write_units(item_size(&group_item(log, group, &all)), false));
        Ok(())
    }
    async fn put_deferred_ranges(
        &self,
        log: LogId,
        ranges: &[ClientRange],
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        let mut t = lock(&self.tables)?;
        for range in ranges {
            *units += RequestUnits::writes(write_units(
                item_size(&client_range_to_item(log, range)),
                false,
            ));
            t.ranges
                .insert((log, range.client.clone(), range.key), range.clone());
        }
        Ok(())
    }
}

#[async_trait]
impl DedupeKeys for MemLogStore {
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

    async fn record_owners(&self, log: LogId, owners: &[String]) -> Result<(), StoreError> {
        let mut t = lock(&self.tables)?;
        if let Some(meta) = t.meta.get_mut(&log).filter(|m| m.deleted.is_some()) {
            for o in owners {
                if !meta.owners.contains(o) {
                    meta.owners.push(o.clone());
                }
            }
        }
        Ok(())
    }

    async fn count_delete(
        &self,
        subject: &str,
        window: i64,
        limit: u32,
    ) -> Result<bool, StoreError> {
        let mut t = lock(&self.tables)?;
        let slot = t
            .delete_counts
            .entry(subject.to_owned())
            .or_insert((window, 0));
        if slot.0 < window {
            *slot = (window, 0);
        }
        if slot.0 > window || slot.1 >= limit {
            return Ok(false);
        }
        slot.1 += 1;
        Ok(true)
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
        if deleted < max && t.marks.remove(&log).is_some() {
            deleted += 1;
        }
        let versions: Vec<_> = t
            .versions
            .range((log, 0)..=(log, u64::MAX))
            .map(|(k, _)| *k)
            .take(max.saturating_sub(deleted))
            .collect();
        deleted += versions.len();
        for k in versions {
            t.versions.remove(&k);
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

pub mod catalog;
mod objects;
mod pending;
mod queue;
#[cfg(test)]
mod tests;

pub use catalog::MemCatalog;
pub use objects::MemPayloadStore;
pub use pending::MemPendingStore;
pub use queue::{MemPushQueue, QueuedMessage};

//! A [`LogStore`] wrapper that injects the failures the emulator cannot produce on demand: a
//! conditional put that always loses, and a put whose response is lost after it was applied.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use async_trait::async_trait;
use sheetlog_core::domain::clients::ClientRange;
use sheetlog_core::domain::dedupe::{DedupeHit, DedupeKey, DedupeRecord};
use sheetlog_core::domain::{EntryRecord, LogId, RequestUnits, SegmentRecord};
use sheetlog_core::error::StoreError;
use sheetlog_core::ports::{
    ClientPutOutcome, Consistency, EntryPage, LogStore, OnceOutcome, PutOutcome, RangePut,
    TxOutcome,
};

#[derive(Debug, Default)]
pub struct Faults {
    /// Every conditional put reports that the entry number was taken (by an unknown winner).
    pub always_taken: AtomicBool,
    /// The next put is applied, then answered as if the SDK retried it after a lost response.
    pub lose_next_put_response: AtomicBool,
    /// Puts that reached the inner store.
    pub puts: AtomicU32,
    /// Creating a log fails, as a throttled transaction does, and writes nothing.
    pub fail_create_log: AtomicBool,
}

#[derive(Debug)]
pub struct FaultyStore<S> {
    pub inner: S,
    pub faults: std::sync::Arc<Faults>,
}

#[async_trait]
impl<S: LogStore> LogStore for FaultyStore<S> {
    async fn create_log(
        &self,
        log: LogId,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        if self.faults.fail_create_log.load(Ordering::SeqCst) {
            return Err(StoreError::Throttled {
                service: "DynamoDB",
                operation: "TransactWriteItems",
            });
        }
        self.inner.create_log(log, segment, first, units).await
    }
    async fn newest_segments(
        &self,
        log: LogId,
        limit: u32,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        self.inner
            .newest_segments(log, limit, consistency, units)
            .await
    }
    async fn all_segments(
        &self,
        log: LogId,
        units: &mut RequestUnits,
    ) -> Result<Vec<SegmentRecord>, StoreError> {
        self.inner.all_segments(log, units).await
    }
    async fn newest_entry(
        &self,
        log: LogId,
        segment: u64,
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<EntryRecord>, StoreError> {
        self.inner
            .newest_entry(log, segment, consistency, units)
            .await
    }
    async fn put_entry(
        &self,
        log: LogId,
        entry: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<PutOutcome, StoreError> {
        if self.faults.always_taken.load(Ordering::SeqCst) {
            return Ok(PutOutcome::Taken(None));
        }
        self.faults.puts.fetch_add(1, Ordering::SeqCst);
        let first = self.inner.put_entry(log, entry, units).await?;
        if self
            .faults
            .lose_next_put_response
            .swap(false, Ordering::SeqCst)
        {
            // What the SDK's automatic retry sees after the first response went missing.
            self.faults.puts.fetch_add(1, Ordering::SeqCst);
            return self.inner.put_entry(log, entry, units).await;
        }
        Ok(first)
    }
    async fn put_client_entries(
        &self,
        log: LogId,
        entry: &EntryRecord,
        ranges: &[RangePut],
        units: &mut RequestUnits,
    ) -> Result<ClientPutOutcome, StoreError> {
        self.inner
            .put_client_entries(log, entry, ranges, units)
            .await
    }
    async fn client_ranges(
        &self,
        log: LogId,
        client: &str,
        at_most: Option<u64>,
        limit: u32,
        units: &mut RequestUnits,
    ) -> Result<Vec<ClientRange>, StoreError> {
        self.inner
            .client_ranges(log, client, at_most, limit, units)
            .await
    }
    async fn group_clients(
        &self,
        log: LogId,
        group: &str,
        units: &mut RequestUnits,
    ) -> Result<Vec<String>, StoreError> {
        self.inner.group_clients(log, group, units).await
    }
    async fn put_entry_once(
        &self,
        log: LogId,
        entry: &EntryRecord,
        seq: u64,
        key: &DedupeRecord,
        units: &mut RequestUnits,
    ) -> Result<OnceOutcome, StoreError> {
        self.inner.put_entry_once(log, entry, seq, key, units).await
    }
    async fn find_key(
        &self,
        key: &DedupeKey,
        columns: &[String],
        consistency: Consistency,
        units: &mut RequestUnits,
    ) -> Result<Option<DedupeHit>, StoreError> {
        self.inner.find_key(key, columns, consistency, units).await
    }
    async fn start_segment(
        &self,
        log: LogId,
        end: &EntryRecord,
        segment: &SegmentRecord,
        first: &EntryRecord,
        units: &mut RequestUnits,
    ) -> Result<TxOutcome, StoreError> {
        self.inner
            .start_segment(log, end, segment, first, units)
            .await
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
        self.inner
            .read_entries(log, segment, from, limit, consistency, units)
            .await
    }
    async fn set_snapshot_root(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        root: &str,
        units: &mut RequestUnits,
    ) -> Result<(), StoreError> {
        self.inner
            .set_snapshot_root(log, segment, num, root, units)
            .await
    }
    async fn advance_last_snapshot(
        &self,
        log: LogId,
        segment: u64,
        num: u64,
        units: &mut RequestUnits,
    ) -> Result<bool, StoreError> {
        self.inner
            .advance_last_snapshot(log, segment, num, units)
            .await
    }
}

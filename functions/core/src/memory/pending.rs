//! The Pending Snapshots table in memory ([`MemPendingStore`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::lock;
use crate::domain::{Guarded, LogId, PendingKey, PendingSnapshot};
use crate::error::StoreError;
use crate::ports::PendingSnapshots;

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

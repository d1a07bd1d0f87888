//! Payload and snapshot objects in memory ([`MemPayloadStore`]).

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::lock;
use crate::error::StoreError;
use crate::ports::PayloadStore;

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

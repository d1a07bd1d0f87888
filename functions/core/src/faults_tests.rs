//! The fault adapter on the ports declared outside the log (the snapshot blobs, the catalog).

use super::*;
use crate::catalog::{Catalog, CatalogError, Sheet};

fn throttling() -> Arc<Faults> {
    Faults::new(
        FaultProfile {
            throttle: 1.0,
            ..FaultProfile::none()
        },
        1,
    )
}

#[cfg(feature = "engine")]
#[tokio::test]
async fn the_blob_store_is_counted_and_throttled_like_every_port() {
    use sheetlog_sheet::snapshot::{BlobStore, MemBlobs};

    let counted = Faults::scripted();
    let blobs = FaultyBlobStore::new(MemBlobs::new(), counted.clone());
    blobs.put("a/b", Bytes::from_static(b"x")).await.unwrap();
    assert!(blobs.exists("a/b").await.unwrap());
    assert_eq!(
        blobs.get("a/b").await.unwrap(),
        Some(Bytes::from_static(b"x"))
    );
    assert_eq!(counted.counts.calls.load(Ordering::Relaxed), 3);

    let faults = throttling();
    let blobs = FaultyBlobStore::new(MemBlobs::new(), faults.clone());
    let err = blobs
        .put("a/b", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(matches!(
        err.source.downcast_ref::<StoreError>(),
        Some(StoreError::Throttled {
            service: "S3",
            operation: "PutObject"
        })
    ));
    assert!(!blobs.inner().exists("a/b").await.unwrap());
    assert_eq!(faults.counts.throttles.load(Ordering::Relaxed), 1);
}

#[cfg(feature = "engine")]
#[tokio::test]
async fn a_chunk_write_whose_response_is_lost_hears_already_there() {
    use sheetlog_sheet::snapshot::{BlobStore, MemBlobs};

    let faults = Faults::new(
        FaultProfile {
            lost_response: 1.0,
            ..FaultProfile::none()
        },
        1,
    );
    let blobs = FaultyBlobStore::new(MemBlobs::new(), faults.clone());
    // Written by the first attempt; the retry's answer is the one the caller gets.
    assert!(
        !blobs
            .put_if_absent("a/b", Bytes::from_static(b"x"))
            .await
            .unwrap()
    );
    assert_eq!(
        blobs.inner().get("a/b").await.unwrap(),
        Some(Bytes::from_static(b"x"))
    );
    assert_eq!(faults.counts.lost_responses.load(Ordering::Relaxed), 1);
    // A key already there loses nothing: nothing was written.
    assert!(
        !blobs
            .put_if_absent("a/b", Bytes::from_static(b"x"))
            .await
            .unwrap()
    );
    assert_eq!(faults.counts.lost_responses.load(Ordering::Relaxed), 1);

    // Throttled like every other PutObject.
    let blobs = FaultyBlobStore::new(MemBlobs::new(), throttling());
    let err = blobs
        .put_if_absent("a/b", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(matches!(
        err.source.downcast_ref::<StoreError>(),
        Some(StoreError::Throttled {
            service: "S3",
            operation: "PutObject"
        })
    ));
    assert!(!blobs.inner().exists("a/b").await.unwrap());
}

fn sheet(owner: &str) -> Sheet {
    Sheet {
        log: LogId::new_random(),
        name: "Budget".into(),
        owner: owner.into(),
        created_ms: 1_000,
        updated_ms: 1_000,
    }
}

#[tokio::test]
async fn a_catalog_create_whose_response_is_lost_is_retried_and_succeeds() {
    let faults = Faults::new(
        FaultProfile {
            lost_response: 1.0,
            ..FaultProfile::none()
        },
        1,
    );
    let c = Layered::new(crate::memory::MemCatalog::new(), faults.clone());
    let s = sheet("alice");
    c.create_sheet(&s, None).await.unwrap();
    assert_eq!(faults.counts.lost_responses.load(Ordering::Relaxed), 1);
    assert_eq!(
        c.role("alice", s.log).await.unwrap(),
        Some(crate::catalog::Role::Owner)
    );
    // Another's create of the same id still fails, lost response or not.
    let other = Sheet {
        owner: "bob".into(),
        ..s
    };
    assert!(matches!(
        c.create_sheet(&other, None).await,
        Err(CatalogError::Exists(_))
    ));
}

#[tokio::test]
async fn a_throttled_catalog_fails_as_the_store_does_and_writes_nothing() {
    let c = Layered::new(crate::memory::MemCatalog::new(), throttling());
    let s = sheet("alice");
    assert!(matches!(
        c.create_sheet(&s, None).await,
        Err(CatalogError::Store(StoreError::Throttled {
            service: "DynamoDB",
            operation: "TransactWriteItems"
        }))
    ));
    assert!(matches!(
        c.role("alice", s.log).await,
        Err(CatalogError::Store(StoreError::Throttled {
            operation: "GetItem",
            ..
        }))
    ));
    assert_eq!(c.inner().sheet(s.log).await.unwrap(), None);
}

#[tokio::test]
async fn a_catalog_listing_may_miss_a_just_added_member_until_the_window_passes() {
    let stale = |stale_for| {
        Faults::new(
            FaultProfile {
                stale_read: 1.0,
                stale_for,
                ..FaultProfile::none()
            },
            1,
        )
    };
    let faults = stale(Duration::from_secs(60));
    let c = Layered::new(crate::memory::MemCatalog::new(), faults.clone());
    let s = sheet("alice");
    c.create_sheet(&s, None).await.unwrap();
    assert!(
        c.list_sheets("alice", 10, None)
            .await
            .unwrap()
            .sheets
            .is_empty()
    );
    assert_eq!(faults.counts.stale_reads.load(Ordering::Relaxed), 1);
    // The access check is a strong read: the owner is one at once.
    assert!(c.role("alice", s.log).await.unwrap().is_some());

    let c = Layered::new(crate::memory::MemCatalog::new(), stale(Duration::ZERO));
    c.create_sheet(&s, None).await.unwrap();
    assert_eq!(
        c.list_sheets("alice", 10, None).await.unwrap().sheets.len(),
        1
    );
}

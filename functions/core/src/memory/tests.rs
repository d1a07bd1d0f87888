//! The in-memory stores keep the conditions the adapters rely on.

use bytes::Bytes;

use super::*;
use crate::domain::{Guarded, PendingKey};
use crate::log::AppendOptions;
use crate::log::test_support::{SET, mem_log, raw_set_entry};
use crate::ports::PendingSnapshots;

#[tokio::test]
async fn the_log_algorithms_run_on_the_memory_store() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    for i in 0..5u8 {
        let e = raw_set_entry(vec![i; 8]);
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
        kind: SET,
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

//! Idempotency keys over the in-memory stores (the same rules run against the emulator in
//! `tests/tests/integration/dedupe.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::test_support::raw_set_entry;
use super::*;
use crate::aws::items::Item;
use crate::domain::dedupe::{DedupeKey, column_name, month_index};
use crate::faults::{FaultProfile, Faults, FaultyLogStore};
use crate::memory::{MemLogStore, MemPayloadStore};

fn at(y: i32, m: u8, d: u8, secs: i64) -> i64 {
    let date = time::Date::from_calendar_date(y, time::Month::try_from(m).unwrap(), d).unwrap();
    date.midnight().assume_utc().unix_timestamp() + secs
}

/// A log over the in-memory stores whose clock reads `now` (seconds), so a test can move time.
fn log_on_clock(now: Arc<AtomicI64>) -> EventLog<Arc<MemLogStore>, MemPayloadStore> {
    EventLog::new(
        Arc::new(MemLogStore::new()),
        MemPayloadStore::new(),
        LogConfig::default(),
    )
    .unwrap()
    .with_clock(Clock::new(move || now.load(Ordering::SeqCst)))
}

#[tokio::test]
async fn a_retried_key_appends_once_and_answers_the_first_seq() {
    let log = log_on_clock(Arc::new(AtomicI64::new(now_secs())));
    let id = log.create().await.unwrap().log;
    let key = IdempotencyKey::request("order-1");
    let first = log
        .append_once(id, raw_set_entry(b"7"), AppendOptions::default(), &key)
        .await
        .unwrap();
    let AppendOnce::Appended(a) = &first else {
        panic!("first append was {first:?}")
    };
    assert_eq!(a.seq, 1);
    // With the hint from that append: one transaction of two items under 1 KB (2 WRU each),
    // after a half-unit head read.
    let hinted = log
        .append_once(
            id,
            raw_set_entry(b"9"),
            AppendOptions {
                segment_hint: Some(a.hint),
                ..AppendOptions::default()
            },
            &IdempotencyKey::request("order-0"),
        )
        .await
        .unwrap();
    assert_eq!((hinted.units().write, hinted.units().read), (4.0, 0.5));
    let again = log
        .append_once(id, raw_set_entry(b"7"), AppendOptions::default(), &key)
        .await
        .unwrap();
    assert!(
        matches!(again, AppendOnce::Duplicate { seq: 1, .. }),
        "{again:?}"
    );
    // The duplicate costs the failed transaction: 2 WRU per item.
    assert_eq!(again.units().write, 4.0);
    // A different request under the same key is refused, and so is nothing appended.
    match log
        .append_once(id, raw_set_entry(b"8"), AppendOptions::default(), &key)
        .await
    {
        Err(LogError::KeyReused { seq: 1 }) => {}
        other => panic!("expected KeyReused, got {other:?}"),
    }
    // The same key on another log is independent.
    let other = log.create().await.unwrap().log;
    let there = log
        .append_once(other, raw_set_entry(b"7"), AppendOptions::default(), &key)
        .await
        .unwrap();
    assert!(matches!(there, AppendOnce::Appended(_)));
    assert_eq!(log.read_since(id, 0, 10).await.unwrap().entries.len(), 3);
}

#[tokio::test]
async fn a_retry_with_a_now_stale_expected_seq_is_a_duplicate_not_a_conflict() {
    let log = log_on_clock(Arc::new(AtomicI64::new(now_secs())));
    let id = log.create().await.unwrap().log;
    let key = IdempotencyKey::request("k");
    let opts = AppendOptions {
        expected_seq: Some(1),
        ..AppendOptions::default()
    };
    log.append_once(id, raw_set_entry(b"a"), opts, &key)
        .await
        .unwrap();
    let again = log
        .append_once(id, raw_set_entry(b"a"), opts, &key)
        .await
        .unwrap();
    assert!(
        matches!(again, AppendOnce::Duplicate { seq: 1, .. }),
        "{again:?}"
    );
    // Found by the strong read of the key after the sequence check failed: no write at all.
    assert_eq!(again.units().write, 0.0);
    // Without the key it is the conflict it always was.
    assert!(matches!(
        log.append(id, raw_set_entry(b"a"), opts).await,
        Err(LogError::Conflict {
            expected: 1,
            next_seq: 2
        })
    ));
}

fn columns_of(item: &Item) -> Vec<String> {
    let mut c: Vec<String> = item
        .keys()
        .filter(|k| k.starts_with('m'))
        .cloned()
        .collect();
    c.sort();
    c
}

/// The window: a key written in the last second of January (February has 28 days) is still a
/// duplicate on 2 March, 30 days later, and forgotten on 3 March, when the write that records
/// it again also removes January's column from the item.
#[tokio::test]
async fn keys_are_remembered_thirty_days_and_age_out_by_month_column() {
    let now = Arc::new(AtomicI64::new(at(2026, 1, 31, 86_399)));
    let store = Arc::new(MemLogStore::new());
    let log = EventLog::new(store.clone(), MemPayloadStore::new(), LogConfig::default())
        .unwrap()
        .with_clock(Clock::new({
            let now = now.clone();
            move || now.load(Ordering::SeqCst)
        }));
    let id = log.create().await.unwrap().log;
    let key = IdempotencyKey::request("late-january");
    let append = || log.append_once(id, raw_set_entry(b"x"), AppendOptions::default(), &key);
    assert!(matches!(append().await.unwrap(), AppendOnce::Appended(_)));
    let dk = DedupeKey::new(log.config().dedupe_prefix_bits, id, key.kind, &key.key);
    let jan = column_name(month_index(now.load(Ordering::SeqCst)));

    for (day, secs) in [(15, 0), (28, 86_399)] {
        now.store(at(2026, 2, day, secs), Ordering::SeqCst);
        assert!(matches!(
            append().await.unwrap(),
            AppendOnce::Duplicate { seq: 1, .. }
        ));
    }
    now.store(at(2026, 3, 2, 86_399), Ordering::SeqCst);
    assert!(matches!(
        append().await.unwrap(),
        AppendOnce::Duplicate { seq: 1, .. }
    ));
    let item = store.dedupe_item(&dk.prefix).unwrap().unwrap();
    assert_eq!(columns_of(&item), vec![jan.clone()]);

    now.store(at(2026, 3, 3, 0), Ordering::SeqCst);
    let fresh = append().await.unwrap();
    assert!(
        matches!(fresh, AppendOnce::Appended(ref a) if a.seq == 2),
        "{fresh:?}"
    );
    let item = store.dedupe_item(&dk.prefix).unwrap().unwrap();
    let march = column_name(month_index(now.load(Ordering::SeqCst)));
    assert_eq!(
        columns_of(&item),
        vec![march],
        "January's column was removed"
    );
}

#[tokio::test]
async fn a_lost_transaction_response_is_recognised_as_our_own_write() {
    let mut p = FaultProfile::named("none").unwrap();
    p.lost_response = 1.0;
    let faults = Faults::new(p, 9);
    let store = FaultyLogStore::new(MemLogStore::new(), faults.clone());
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap();
    let id = log.create().await.unwrap().log;
    for i in 1..=5u64 {
        let key = IdempotencyKey::request(format!("k{i}"));
        let out = log
            .append_once(id, raw_set_entry(b"x"), AppendOptions::default(), &key)
            .await
            .unwrap();
        assert!(
            matches!(out, AppendOnce::Appended(ref a) if a.seq == i),
            "the retried transaction is our own write, not a duplicate: {out:?}"
        );
    }
    assert_eq!(log.read_since(id, 0, 100).await.unwrap().entries.len(), 6);
}

#[tokio::test]
async fn many_concurrent_requests_with_one_key_make_one_entry() {
    let mut p = FaultProfile::named("hostile").unwrap();
    p.stale_for = std::time::Duration::from_millis(5);
    let store = FaultyLogStore::new(MemLogStore::new(), Faults::new(p, 17));
    let log = Arc::new(EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap());
    let id = log.create().await.unwrap().log;
    let key = IdempotencyKey::request("one");
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (log, key) = (log.clone(), key.clone());
            tokio::spawn(async move {
                loop {
                    match log
                        .append_once(id, raw_set_entry(b"v"), AppendOptions::default(), &key)
                        .await
                    {
                        Ok(out) => return out.seq(),
                        // Injected throttling and timeouts: the client retries with the same key.
                        Err(LogError::Store(e)) if e.is_retryable() => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    assert!(seqs.iter().all(|s| *s == seqs[0]), "{seqs:?}");
    let page = log.read_since(id, 0, 100).await.unwrap();
    assert_eq!(page.entries.len(), 2, "entry 0 and exactly one append");
}

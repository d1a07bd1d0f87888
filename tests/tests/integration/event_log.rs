//! The event log against the emulator: the append protocol under concurrency, segments, load and
//! read-since, large bodies, request units and typed errors.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use aws_sdk_dynamodb::types::AttributeValue;
use bytes::Bytes;
use sheetlog_core::aws::items::{entry_key, entry_to_item, item_size, segment_key};
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::keys::AUTO_DELETE_TAG_KEY;
use sheetlog_core::domain::{EntryRecord, EntryType, LogId, NewEntry, segment_id};
use sheetlog_core::faults::{Faults, FaultyLogStore};
use sheetlog_core::log::{AppendOptions, EventLog};
use sheetlog_core::{LogError, StoreError};
use sheetlog_tests::TestStack;
use sheetlog_tests::fixtures::{SET_ENTRY_TYPE, raw_set_entry};

/// Appends `n` entries with bodies "e0", "e1", … and returns their sequences.
async fn append_n(
    log: &sheetlog_tests::stack::AwsLog,
    id: LogId,
    n: usize,
) -> anyhow::Result<Vec<u64>> {
    let mut seqs = Vec::new();
    for i in 0..n {
        seqs.push(
            log.append(id, raw_set_entry(format!("e{i}")), AppendOptions::default())
                .await?
                .seq,
        );
    }
    Ok(seqs)
}

/// Reads the whole log from `from` in pages of `page` entries.
async fn read_all(
    log: &sheetlog_tests::stack::AwsLog,
    id: LogId,
    from: u64,
    page: usize,
) -> anyhow::Result<Vec<sheetlog_core::Entry>> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let p = log.read_since(id, next, page).await?;
        assert_eq!(p.next_seq, next + p.entries.len() as u64);
        next = p.next_seq;
        out.extend(p.entries);
        if p.complete {
            return Ok(out);
        }
    }
}

fn assert_gapless(entries: &[sheetlog_core::Entry], from: u64) {
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.seq, from + i as u64, "gap or reorder at position {i}");
    }
}

/// The append's correctness rests on DynamoDB applying a conditional put atomically: of several
/// writers racing for one entry number, exactly one succeeds. Plain moto checks the condition and
/// writes without a lock, so two racers can both "win"; the emulator we start
/// (`scripts/lib/moto_server.py`) serialises DynamoDB requests as DynamoDB would. The emulator here
/// switches threads every microsecond, so plain moto fails this test at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn the_emulator_lets_exactly_one_of_many_racing_conditional_puts_win() -> anyhow::Result<()> {
    use sheetlog_core::ports::{LogEntries, PutOutcome};
    let _slot = sheetlog_tests::heavy_test_slot().await;
    let stack = TestStack::on(sheetlog_tests::Emulator::start_racy()?, "atomic-put").await?;
    let store = Arc::new(stack.log_store());
    let id = LogId::new_random();
    for num in 0..20u64 {
        let mut racers = Vec::new();
        for w in 0..16u8 {
            let store = store.clone();
            racers.push(tokio::spawn(async move {
                let rec = EntryRecord {
                    segment: 0,
                    num,
                    created: 0,
                    kind: SET_ENTRY_TYPE,
                    version: 1,
                    body: Some(Bytes::from(vec![w; 8])),
                    external: None,
                    snapshot_root: None,
                    attempt: None,
                };
                let mut units = sheetlog_core::RequestUnits::default();
                store.put_entry(id, &rec, &mut units).await
            }));
        }
        let mut won = 0;
        for r in racers {
            if r.await?? == PutOutcome::Written {
                won += 1;
            }
        }
        assert_eq!(
            won, 1,
            "entry {num}: {won} writers won the same conditional put"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_are_gapless_unique_and_all_readable() -> anyhow::Result<()> {
    let _slot = sheetlog_tests::heavy_test_slot().await;
    let stack = TestStack::new("concurrent").await?;
    // This test is about what contention must never do (gaps, duplicates, lost acks), so it
    // lifts the give-up budget: on a loaded 2-core CI runner a writer once lost more than the
    // default 30 races in a row. Giving up is covered by
    // `exhausted_attempts_give_a_contention_error`.
    let log = Arc::new(stack.log_with(LogConfig {
        max_attempts: 500,
        ..LogConfig::default()
    })?);
    let id = log.create().await?.log;

    // 8 writers x 25 by default: enough for hundreds of collisions in a CI run; set
    // SHEETLOG_CONCURRENT_APPENDS (appends per writer) higher for a longer soak.
    let per_writer: usize = std::env::var("SHEETLOG_CONCURRENT_APPENDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let mut tasks = Vec::new();
    for task in 0..8 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut hint = None;
            let mut attempts = 0;
            let mut longest = 0;
            for i in 0..per_writer {
                let text = format!("task{task}-{i}");
                let a = log
                    .append(
                        id,
                        raw_set_entry(&text),
                        AppendOptions {
                            expected_seq: None,
                            segment_hint: hint,
                        },
                    )
                    .await?;
                hint = Some(a.hint);
                attempts += a.attempts;
                longest = longest.max(a.attempts);
                acked.push((a.seq, text));
            }
            Ok::<_, LogError>((acked, attempts, longest))
        }));
    }
    let mut acked: BTreeMap<u64, String> = BTreeMap::new();
    let mut total_attempts = 0;
    let mut longest_run = 0;
    for t in tasks {
        let (list, attempts, longest) = t.await??;
        total_attempts += attempts;
        longest_run = longest_run.max(longest);
        for (seq, text) in list {
            assert!(
                acked.insert(seq, text).is_none(),
                "sequence {seq} acknowledged twice"
            );
        }
    }
    let total = 8 * per_writer;
    println!("{total} appends took {total_attempts} attempts, at most {longest_run} for one");
    assert_eq!(acked.len(), total);
    assert!(
        total_attempts > total as u32,
        "8 writers on one log should have collided at least once"
    );

    let entries = read_all(&log, id, 0, 100).await?;
    assert_eq!(
        entries.len(),
        total + 1,
        "snapshot entry 0 plus every append"
    );
    assert_gapless(&entries, 0);
    let mut seen = HashSet::new();
    for e in &entries[1..] {
        let text = String::from_utf8(e.body.to_vec())?;
        assert_eq!(
            acked.get(&e.seq),
            Some(&text),
            "entry at {} is not what was acknowledged",
            e.seq
        );
        assert!(seen.insert(text), "an entry appears twice");
    }
    Ok(())
}

#[tokio::test]
async fn stale_expected_sequence_conflicts_with_the_next_sequence_and_a_retry_succeeds()
-> anyhow::Result<()> {
    let (_stack, log, id) = TestStack::with_new_log("expected").await?;
    append_n(&log, id, 3).await?; // sequences 1, 2, 3

    let stale = AppendOptions {
        expected_seq: Some(2),
        segment_hint: None,
    };
    match log.append(id, raw_set_entry("late"), stale).await {
        Err(LogError::Conflict {
            expected: 2,
            next_seq: 4,
        }) => {}
        other => panic!("expected a conflict reporting next sequence 4, got {other:?}"),
    }
    let ahead = AppendOptions {
        expected_seq: Some(9),
        segment_hint: None,
    };
    assert!(matches!(
        log.append(id, raw_set_entry("early"), ahead).await,
        Err(LogError::Conflict {
            expected: 9,
            next_seq: 4
        })
    ));
    let retry = log
        .append(
            id,
            raw_set_entry("retried"),
            AppendOptions {
                expected_seq: Some(4),
                segment_hint: None,
            },
        )
        .await?;
    assert_eq!((retry.seq, retry.next_seq), (4, 5));
    let all = read_all(&log, id, 0, 100).await?;
    assert_eq!(all.len(), 5, "the rejected appends wrote nothing");
    Ok(())
}

#[tokio::test]
async fn load_and_read_since_cross_a_segment_boundary() -> anyhow::Result<()> {
    let (_stack, log, id) = TestStack::with_new_log("segments").await?;
    append_n(&log, id, 4).await?; // 1..=4

    let started = log.start_segment(id).await?;
    assert_eq!(
        (started.segment, started.end_seq, started.snapshot_seq),
        (1, 5, 6)
    );
    let after = append_n(&log, id, 3).await?;
    assert_eq!(
        after,
        vec![7, 8, 9],
        "sequences continue across the boundary"
    );

    // Segment 1's snapshot is still pending: load falls back to segment 0's.
    let loaded = log.load(id).await?;
    assert_eq!(loaded.snapshot.seq, 0);
    let kinds: Vec<(u64, EntryType)> = loaded.entries.iter().map(|e| (e.seq, e.kind)).collect();
    assert_eq!(kinds.len(), 9);
    assert_eq!(kinds[4], (5, EntryType::END_SEGMENT));
    assert_eq!(kinds[5], (6, EntryType::SNAPSHOT));
    assert_eq!(loaded.next_seq, 10);

    // Read since 3 in pages of 2: crosses from segment 0 into segment 1.
    let since = read_all(&log, id, 3, 2).await?;
    assert_gapless(&since, 3);
    assert_eq!(since.len(), 7);
    assert_eq!(
        since.iter().map(|e| e.segment).collect::<Vec<_>>(),
        vec![0, 0, 0, 1, 1, 1, 1]
    );
    assert_eq!(
        since.last().map(|e| e.body.clone()),
        Some(Bytes::from_static(b"e2"))
    );

    // Reading at the end is empty and complete; past the end is out of range.
    let end = log.read_since(id, 10, 10).await?;
    assert!(end.entries.is_empty() && end.complete);
    match log.read_since(id, 12, 10).await {
        Err(LogError::OutOfRange {
            from: 12,
            next_seq: 10,
        }) => {}
        other => panic!("expected out of range, got {other:?}"),
    }

    // Once segment 1's snapshot completes, load starts there.
    log.complete_snapshot(id, 1, 0, "snapshots/test/root")
        .await?;
    let loaded = log.load(id).await?;
    assert_eq!(loaded.snapshot.seq, 6);
    assert_eq!(
        loaded.snapshot.snapshot_root.as_deref(),
        Some("snapshots/test/root")
    );
    assert_eq!(
        loaded.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![7, 8, 9]
    );
    Ok(())
}

#[tokio::test]
async fn a_stale_segment_hint_follows_the_end_segment_entry() -> anyhow::Result<()> {
    let (_stack, log, id) = TestStack::with_new_log("hint").await?;
    let first = log
        .append(id, raw_set_entry("a"), AppendOptions::default())
        .await?;
    log.start_segment(id).await?;
    let next = log
        .append(
            id,
            raw_set_entry("b"),
            AppendOptions {
                expected_seq: Some(4),
                segment_hint: Some(first.hint),
            },
        )
        .await?;
    assert_eq!((next.seq, next.segment, next.entry), (4, 1, 1));
    Ok(())
}

#[tokio::test]
async fn readers_too_far_behind_must_reload() -> anyhow::Result<()> {
    let (_stack, log, id) = TestStack::with_new_log("reload").await?;
    append_n(&log, id, 2).await?; // 1, 2
    log.start_segment(id).await?; // end 3, snapshot 4
    log.complete_snapshot(id, 1, 0, "root-1").await?;
    append_n(&log, id, 1).await?; // 5
    log.start_segment(id).await?; // end 6, snapshot 7 in segment 2

    // Segments 1 and 2 are the two newest; sequence 2 lies in segment 0.
    match log.read_since(id, 2, 10).await {
        Err(LogError::ReloadRequired {
            from: 2,
            first_retained: 4,
        }) => {}
        other => panic!("expected reload required, got {other:?}"),
    }
    let page = log.read_since(id, 4, 10).await?;
    assert_eq!(
        page.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![4, 5, 6, 7]
    );
    Ok(())
}

#[tokio::test]
async fn new_segment_is_refused_until_the_current_snapshot_completes() -> anyhow::Result<()> {
    let (_stack, log, id) = TestStack::with_new_log("refuse").await?;
    log.start_segment(id).await?;
    match log.start_segment(id).await {
        Err(LogError::SnapshotIncomplete { segment: 1, .. }) => {}
        other => panic!("expected snapshot incomplete, got {other:?}"),
    }
    log.complete_snapshot(id, 1, 0, "root").await?;
    assert_eq!(log.start_segment(id).await?.segment, 2);
    Ok(())
}

#[tokio::test]
async fn load_reports_a_corrupt_log_when_no_recent_segment_has_a_snapshot() -> anyhow::Result<()> {
    let (stack, log, id) = TestStack::with_new_log("corrupt").await?;
    log.start_segment(id).await?;
    // Damage segment 0: remove its Last Snapshot.
    stack
        .dynamo
        .update_item()
        .table_name(&stack.resources.segment_table)
        .set_key(Some(segment_key(id, 0)))
        .update_expression("REMOVE s")
        .send()
        .await?;
    match log.load(id).await {
        Err(LogError::CorruptLog { detail, .. }) => {
            assert!(detail.contains("segment 1"), "{detail}")
        }
        other => panic!("expected corrupt log, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn corrupted_item_attributes_are_typed_errors() -> anyhow::Result<()> {
    let (stack, log, id) = TestStack::with_new_log("baditem").await?;
    let mut item = entry_to_item(
        id,
        &EntryRecord {
            segment: 0,
            num: 1,
            created: 1,
            kind: SET_ENTRY_TYPE,
            version: 1,
            body: Some(Bytes::from_static(b"x")),
            external: None,
            snapshot_root: None,
            attempt: None,
        },
    );
    item.insert("t".into(), AttributeValue::S("set".into()));
    stack
        .dynamo
        .put_item()
        .table_name(&stack.resources.entry_table)
        .set_item(Some(item))
        .send()
        .await?;
    match log.read_since(id, 0, 10).await {
        Err(LogError::Store(StoreError::Corrupt { detail, .. })) => {
            assert!(detail.contains("t"), "{detail}")
        }
        other => panic!("expected a corrupt item error, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_segment_larger_than_one_megabyte_reads_back_completely_and_in_order()
-> anyhow::Result<()> {
    let (stack, log, id) = TestStack::with_new_log("onemb").await?;
    // 130 entries of 10 KB (inline: under the 16 KB threshold) = 1.3 MB in one segment.
    for i in 0..130u32 {
        let mut b = vec![b'.'; 10 * 1024];
        b[..4].copy_from_slice(&i.to_be_bytes());
        log.append(id, raw_set_entry(b), AppendOptions::default())
            .await?;
    }
    // The emulator really pages: one raw query stops short with a LastEvaluatedKey.
    let raw = stack
        .dynamo
        .query()
        .table_name(&stack.resources.entry_table)
        .key_condition_expression("s = :s")
        .expression_attribute_values(":s", AttributeValue::B(segment_id(id, 0).into()))
        .send()
        .await?;
    assert!(
        raw.last_evaluated_key.is_some(),
        "a 1.3 MB segment must not fit in one page"
    );
    assert!(raw.count < 131);

    let page = log.read_since(id, 1, 1000).await?;
    assert!(page.complete);
    assert_eq!(page.entries.len(), 130);
    assert_gapless(&page.entries, 1);
    for (i, e) in page.entries.iter().enumerate() {
        assert_eq!(e.body[..4], (i as u32).to_be_bytes());
    }
    let loaded = log.load(id).await?;
    assert_eq!(loaded.entries.len(), 130);
    assert!(
        loaded.units.read >= (130.0 * 10240.0 / 4096.0 / 2.0),
        "reads are charged per 4 KB: {}",
        loaded.units.read
    );
    Ok(())
}

#[tokio::test]
async fn large_bodies_go_to_s3_tagged_and_small_ones_stay_inline() -> anyhow::Result<()> {
    let (stack, log, id) = TestStack::with_new_log("bodies").await?;
    let big: Vec<u8> = (0..100 * 1024).map(|i| (i % 251) as u8).collect();
    let small = vec![7u8; 10 * 1024];
    let a = log
        .append(id, raw_set_entry(&big), AppendOptions::default())
        .await?;
    let b = log
        .append(id, raw_set_entry(&small), AppendOptions::default())
        .await?;

    let item_a = stack
        .dynamo
        .get_item()
        .table_name(&stack.resources.entry_table)
        .set_key(Some(entry_key(id, 0, a.entry)))
        .send()
        .await?
        .item
        .unwrap_or_default();
    let key = match item_a.get("e") {
        Some(AttributeValue::S(k)) => k.clone(),
        other => panic!("large body should be referenced by key, got {other:?}"),
    };
    assert!(!item_a.contains_key("b"));
    assert!(key.starts_with(&format!("payloads/{id}/")));
    assert!(
        item_size(&item_a) < 1024,
        "the item referencing S3 stays under 1 KB"
    );
    let tags = stack
        .s3
        .get_object_tagging()
        .bucket(&stack.resources.bucket)
        .key(&key)
        .send()
        .await?;
    assert!(
        tags.tag_set()
            .iter()
            .any(|t| t.key() == AUTO_DELETE_TAG_KEY && t.value() == "true")
    );

    let item_b = stack
        .dynamo
        .get_item()
        .table_name(&stack.resources.entry_table)
        .set_key(Some(entry_key(id, 0, b.entry)))
        .send()
        .await?
        .item
        .unwrap_or_default();
    assert!(item_b.contains_key("b") && !item_b.contains_key("e"));

    let page = log.read_since(id, a.seq, 10).await?;
    assert_eq!(page.entries[0].body.as_ref(), big.as_slice());
    assert_eq!(page.entries[1].body.as_ref(), small.as_slice());
    assert_eq!(
        page.entries[0].payload, None,
        "an offloaded body is not an attached payload"
    );
    Ok(())
}

#[tokio::test]
async fn uncontended_append_with_a_hint_costs_half_a_read_and_one_write() -> anyhow::Result<()> {
    let (stack, log, id) = TestStack::with_new_log("units").await?;
    let first = log
        .append(id, raw_set_entry("warm"), AppendOptions::default())
        .await?;
    assert_eq!(
        first.units.read, 1.0,
        "without a hint: segment query + entry query, 0.5 each"
    );

    let cell = raw_set_entry(vec![1u8; 30]);
    let a = log
        .append(
            id,
            cell,
            AppendOptions {
                expected_seq: None,
                segment_hint: Some(first.hint),
            },
        )
        .await?;
    assert_eq!((a.units.read, a.units.write, a.attempts), (0.5, 1.0, 1));

    let item = stack
        .dynamo
        .get_item()
        .table_name(&stack.resources.entry_table)
        .set_key(Some(entry_key(id, 0, a.entry)))
        .send()
        .await?
        .item
        .unwrap_or_default();
    let size = item_size(&item);
    assert!(size <= 100, "a single-cell entry item is {size} bytes");
    Ok(())
}

#[tokio::test]
async fn bad_input_gives_typed_errors() -> anyhow::Result<()> {
    let stack = TestStack::new("badinput").await?;
    let cfg = LogConfig {
        max_body_bytes: 200 * 1024,
        ..LogConfig::default()
    };
    let log = stack.log_with(cfg)?;
    let unknown = LogId::new_random();
    assert!(matches!(
        log.append(unknown, raw_set_entry("x"), AppendOptions::default())
            .await,
        Err(LogError::LogNotFound(_))
    ));
    assert!(matches!(
        log.load(unknown).await,
        Err(LogError::LogNotFound(_))
    ));
    assert!(matches!(
        log.read_since(unknown, 0, 10).await,
        Err(LogError::LogNotFound(_))
    ));
    assert!(matches!(
        log.segments(unknown).await,
        Err(LogError::LogNotFound(_))
    ));
    assert!(matches!(
        log.start_segment(unknown).await,
        Err(LogError::LogNotFound(_))
    ));

    let id = log.create().await?.log;
    let huge = raw_set_entry(vec![0u8; 300 * 1024]);
    assert!(matches!(
        log.append(id, huge, AppendOptions::default()).await,
        Err(LogError::BodyTooLarge {
            size: 307_200,
            limit: 204_800
        })
    ));
    let end = NewEntry::new(EntryType::END_SEGMENT, 0, Bytes::new());
    assert!(matches!(
        log.append(id, end, AppendOptions::default()).await,
        Err(LogError::InvalidEntry(_))
    ));
    let with_big_body = raw_set_entry(vec![0u8; 20 * 1024]).with_payload("payloads/x/y");
    assert!(matches!(
        log.append(id, with_big_body, AppendOptions::default())
            .await,
        Err(LogError::BodyTooLarge { .. })
    ));
    assert!(
        LogConfig {
            inline_body_max_bytes: 500 * 1024,
            ..LogConfig::default()
        }
        .validate()
        .is_err()
    );
    assert_eq!(
        log.next_seq(id).await?.0,
        1,
        "rejected appends wrote nothing"
    );
    Ok(())
}

#[tokio::test]
async fn exhausted_attempts_give_a_contention_error() -> anyhow::Result<()> {
    let stack = TestStack::new("contention").await?;
    let faults = Faults::scripted();
    let store = FaultyLogStore::new(stack.log_store(), faults.clone());
    let cfg = LogConfig {
        max_attempts: 4,
        ..LogConfig::default()
    };
    let log = EventLog::new(store, stack.bucket(), cfg)?;
    let id = log.create().await?.log;
    faults.script.always_taken.store(true, Ordering::SeqCst);
    match log
        .append(id, raw_set_entry("x"), AppendOptions::default())
        .await
    {
        Err(LogError::Contention { attempts: 4, .. }) => {}
        other => panic!("expected contention, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_put_retried_after_a_lost_response_is_not_appended_twice() -> anyhow::Result<()> {
    let stack = TestStack::new("lostresp").await?;
    let faults = Faults::scripted();
    let store = FaultyLogStore::new(stack.log_store(), faults.clone());
    let log = EventLog::new(store, stack.bucket(), LogConfig::default())?;
    let id = log.create().await?.log;
    faults
        .script
        .lose_next_put_response
        .store(true, Ordering::SeqCst);
    let a = log
        .append(id, raw_set_entry("once"), AppendOptions::default())
        .await?;
    assert_eq!(
        faults.script.puts.load(Ordering::SeqCst),
        2,
        "the put really was retried"
    );
    assert_eq!((a.seq, a.next_seq), (1, 2));
    let all = log.read_since(id, 0, 10).await?;
    assert_eq!(all.entries.len(), 2, "snapshot entry plus exactly one copy");
    Ok(())
}

#[tokio::test]
async fn a_pulls_head_check_with_a_hint_costs_half_a_read_and_never_leads_the_log()
-> anyhow::Result<()> {
    let (_stack, log, id) = TestStack::with_new_log("peek").await?;
    let a = log
        .append(id, raw_set_entry("one"), AppendOptions::default())
        .await?;
    let (cold, hint, units) = log.peek_next_seq(id, None).await?;
    assert_eq!(units.read, 1.0, "without a hint: two eventual queries");
    assert!(cold <= a.seq + 1, "{cold} leads the log ({})", a.seq + 1);
    let (warm, _, units) = log.peek_next_seq(id, Some(hint)).await?;
    assert_eq!(units.read, 0.5, "with a hint: one eventual query");
    assert!(warm <= a.seq + 1);
    // Past a segment boundary the stale hint is followed, still without a strong read.
    let started = log.start_segment(id).await?;
    let b = log
        .append(
            id,
            raw_set_entry("two"),
            AppendOptions {
                expected_seq: None,
                segment_hint: Some(started.hint),
            },
        )
        .await?;
    let (next, at, _) = log.peek_next_seq(id, Some(hint)).await?;
    assert!(next <= b.seq + 1);
    assert_eq!(log.next_seq(id).await?.0, b.seq + 1);
    assert!(at.segment >= hint.segment);
    Ok(())
}

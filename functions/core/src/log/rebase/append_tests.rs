//! Appends with `baseSeq` over the in-memory store: the edit is moved through what was committed
//! after its base, also when it loses the race for its sequence number.
#![cfg(feature = "engine")]

use tokio::sync::Barrier;

use crate::faults::FaultyLogStore;
use crate::log::MAX_REBASE_ENTRIES;
use crate::log::test_support::{entry, insert_rows, log_with_rows, mem_log, set, sheet, text};
use crate::log::tests::{RacingPuts, always_stale};
use crate::log::*;
use crate::memory::{MemLogStore, MemPayloadStore};
use crate::sheet::Sheet;
use crate::sheet::entry::EntryBody;
use crate::sheet::event::{DeleteRows, Event, RowNumber};

#[tokio::test]
async fn an_edit_follows_its_row_through_an_insert_it_had_not_seen() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    log.append(id, entry(&insert_rows(2, 1)), AppendOptions::default())
        .await
        .expect("insert");
    let out = log
        .append_rebased(
            id,
            entry(&set("B5", "note for r5")),
            base,
            AppendOptions::default(),
            None,
        )
        .await
        .expect("rebased");
    assert_eq!(out.applied_as, Some(set("B6", "note for r5")));
    let s = sheet(&log, id).await;
    assert_eq!(text(&s, "A6").as_deref(), Some("r5"));
    assert_eq!(text(&s, "B6").as_deref(), Some("note for r5"));
    assert_eq!(text(&s, "B5"), None);
}

#[tokio::test]
async fn an_edit_with_nothing_moved_is_written_as_sent() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    log.append(id, entry(&set("C1", "x")), AppendOptions::default())
        .await
        .expect("set");
    let out = log
        .append_rebased(
            id,
            entry(&set("B5", "y")),
            base,
            AppendOptions::default(),
            None,
        )
        .await
        .expect("rebased");
    assert_eq!(out.applied_as, None);
    assert_eq!(text(&sheet(&log, id).await, "B5").as_deref(), Some("y"));
}

#[tokio::test]
async fn an_edit_whose_row_was_deleted_is_rejected_and_nothing_is_written() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    let del = Event::DeleteRows(DeleteRows {
        at: RowNumber(3),
        count: 2,
    });
    let before = log
        .append(id, entry(&del), AppendOptions::default())
        .await
        .expect("delete")
        .next_seq;
    let err = log
        .append_rebased(
            id,
            entry(&set("B5", "lost")),
            base,
            AppendOptions::default(),
            None,
        )
        .await
        .expect_err("rejected");
    assert!(
        matches!(&err, LogError::EditRejected(why) if why.contains("B5: its row was deleted")),
        "{err}"
    );
    assert_eq!(log.next_seq(id).await.expect("next").0, before);
}

#[tokio::test]
async fn a_base_past_the_end_or_with_expected_seq_is_refused() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    let err = log
        .append_rebased(
            id,
            entry(&set("A1", "x")),
            base + 5,
            AppendOptions::default(),
            None,
        )
        .await
        .expect_err("ahead");
    assert!(matches!(err, LogError::OutOfRange { .. }), "{err}");
    let opts = AppendOptions {
        expected_seq: Some(base),
        ..AppendOptions::default()
    };
    let err = log
        .append_rebased(id, entry(&set("A1", "x")), base, opts, None)
        .await
        .expect_err("both");
    assert!(matches!(err, LogError::InvalidEntry(_)), "{err}");
}

/// The push path's bound applies to plain appends too: a base more than 5,000 entries behind the
/// head is refused with the push's reason, and nothing is written.
#[tokio::test]
async fn a_base_further_back_than_the_reset_limit_is_refused() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    let mut head = base;
    for i in 0..=MAX_REBASE_ENTRIES {
        head = log
            .append(
                id,
                entry(&set("C1", &i.to_string())),
                AppendOptions::default(),
            )
            .await
            .expect("set")
            .next_seq;
    }
    assert_eq!(head - base, MAX_REBASE_ENTRIES + 1);
    let err = log
        .append_rebased(
            id,
            entry(&set("B5", "x")),
            base,
            AppendOptions::default(),
            None,
        )
        .await
        .expect_err("too old");
    assert!(
        matches!(&err, LogError::EditRejected(why) if why.contains("more than 5000 entries old") && why.contains("pull and edit again")),
        "{err}"
    );
    assert_eq!(log.next_seq(id).await.expect("next").0, head);
    // One entry younger is within the bound and rebases.
    let out = log
        .append_rebased(
            id,
            entry(&set("B5", "y")),
            base + 1,
            AppendOptions::default(),
            None,
        )
        .await
        .expect("within the bound");
    assert!(matches!(out.outcome, AppendOnce::Appended(_)), "{out:?}");
}

/// The rebasing append reads the head, then loses the race for that number to an insert it had
/// not seen: its retry must move the edit through the winner's entry too.
#[tokio::test]
async fn an_edit_that_loses_the_race_is_moved_through_the_winners_entry() {
    let store = crate::layer::Layered::new(
        MemLogStore::new(),
        RacingPuts {
            gate: Barrier::new(2),
        },
    );
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).expect("log");
    let id = log.create().await.expect("create").log;
    let base = 1;
    // Both put entry 1 together; the insert, arriving last at the gate, writes first.
    let (rebased, insert) = tokio::join!(
        log.append_rebased(
            id,
            entry(&set("B5", "note")),
            base,
            AppendOptions::default(),
            None
        ),
        log.append(id, entry(&insert_rows(2, 1)), AppendOptions::default()),
    );
    assert_eq!(insert.expect("insert").seq, 1);
    let rebased = rebased.expect("rebased");
    let AppendOnce::Appended(a) = &rebased.outcome else {
        panic!("appended: {rebased:?}");
    };
    assert_eq!((a.seq, a.attempts), (2, 2));
    assert_eq!(rebased.applied_as, Some(set("B6", "note")));
    let page = log.read_since(id, 0, 10).await.expect("read");
    let mut s = Sheet::new();
    for e in page.entries {
        for ev in EntryBody::decode(e.kind.0, e.version, &e.body)
            .expect("decode")
            .events()
        {
            s.apply(ev, None).expect("apply");
        }
    }
    assert_eq!(text(&s, "B6").as_deref(), Some("note"));
}

/// Eventually consistent reads that miss the newest writes (DynamoDB's, modelled by the fault
/// adapter): the rebase must not run on a head or a page that lacks the insert it has to follow.
#[tokio::test]
async fn stale_reads_do_not_hide_an_entry_the_edit_must_follow() {
    let store = FaultyLogStore::new(MemLogStore::new(), always_stale());
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).expect("log");
    let id = log.create().await.expect("create").log;
    let base = 1;
    log.append(id, entry(&insert_rows(2, 1)), AppendOptions::default())
        .await
        .expect("insert");
    let out = log
        .append_rebased(
            id,
            entry(&set("B5", "note")),
            base,
            AppendOptions::default(),
            None,
        )
        .await
        .expect("rebased");
    assert_eq!(out.applied_as, Some(set("B6", "note")));
    let AppendOnce::Appended(a) = &out.outcome else {
        panic!("appended: {out:?}");
    };
    assert_eq!(a.seq, 2);
}

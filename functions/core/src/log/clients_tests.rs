//! Sync clients over the in-memory stores, with and without injected faults (the same rules run
//! against the emulator in `tests/tests/integration/sync.rs`).
#![cfg(feature = "engine")]

use std::sync::Arc;

use super::*;
use crate::faults::{FaultProfile, Faults, FaultyLogStore};
use crate::memory::{MemLogStore, MemPayloadStore};
use crate::ports::LogStore;
use crate::sheet::{EntryBody, SetCells};

use super::test_support::{big_set, mem_log, set_a1 as set, set_mutations as muts};

/// Pushes until everything given is applied; the seqs of the entries written.
async fn push_all<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    group: &str,
    client: &str,
    m: &[PushedMutation],
) -> Result<Vec<u64>, LogError> {
    let mut seqs = Vec::new();
    loop {
        match log
            .push_run(id, group, client, m, None, RunSource::Push)
            .await?
        {
            RunOutcome::Applied { range, .. } => seqs.push(range.seq),
            RunOutcome::AlreadyApplied { .. } => return Ok(seqs),
        }
    }
}

#[tokio::test]
async fn mutations_apply_once_in_order_and_can_be_found() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let out = log
        .push_run(id, "g", "c1", &muts(1..=3), None, RunSource::Push)
        .await
        .unwrap();
    let RunOutcome::Applied {
        range, appended, ..
    } = out
    else {
        panic!("{out:?}")
    };
    let units = appended.units;
    assert_eq!((range.first, range.last, range.seq), (1, 3, 1));
    // A client's first run: entry, range item and group item in one transaction (2 WRU each
    // under 1 KB), after a strong range query and an eventual head read.
    assert_eq!(units.write, 6.0, "{units:?}");
    // A retry of the same push, and a push that repeats the tail and adds one.
    let again = log
        .push_run(id, "g", "c1", &muts(1..=3), None, RunSource::Push)
        .await
        .unwrap();
    assert!(matches!(again, RunOutcome::AlreadyApplied { ref newest, .. } if newest.seq == 1));
    let out = log
        .push_run(id, "g", "c1", &muts(2..=4), None, RunSource::Push)
        .await
        .unwrap();
    let RunOutcome::Applied {
        range, appended, ..
    } = out
    else {
        panic!("{out:?}")
    };
    let units = appended.units;
    assert_eq!((range.first, range.last, range.seq), (4, 4, 2));
    assert_eq!(units.write, 4.0, "a later run is two items: {units:?}");
    assert_eq!(log.last_mutation(id, "c1").await.unwrap().unwrap().last, 4);
    assert_eq!(
        log.find_mutation(id, "c1", 2).await.unwrap().unwrap().seq,
        1
    );
    assert_eq!(
        log.find_mutation(id, "c1", 4).await.unwrap().unwrap().seq,
        2
    );
    assert_eq!(log.find_mutation(id, "c1", 5).await.unwrap(), None);
    assert_eq!(log.group_clients(id, "g").await.unwrap(), vec!["c1"]);
    assert_eq!(log.last_mutation_before(id, "c1", 2).await.unwrap(), 3);
    assert_eq!(log.last_mutation_before(id, "c1", 1).await.unwrap(), 0);
    // The entries hold the runs, in the log's order.
    let page = log.read_since(id, 0, 10).await.unwrap();
    assert_eq!(page.entries.len(), 3);
    let EntryBody::Mutations(m) =
        EntryBody::decode(page.entries[1].kind.0, 1, &page.entries[1].body).unwrap()
    else {
        panic!("not a mutations entry")
    };
    assert_eq!(
        m.applied.iter().map(|m| m.id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
}

#[tokio::test]
async fn a_gap_is_refused_and_an_unknown_client_past_one_is_lost_state() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let err = log
        .push_run(id, "g", "c", &muts(2..=3), None, RunSource::Push)
        .await
        .unwrap_err();
    assert!(
        matches!(err, LogError::ClientUnknown { got: 2, .. }),
        "{err}"
    );
    push_all(&log, id, "g", "c", &muts(1..=1)).await.unwrap();
    let err = log
        .push_run(id, "g", "c", &muts(3..=5), None, RunSource::Push)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            LogError::MutationGap {
                expected: 2,
                got: 3,
                ..
            }
        ),
        "{err}"
    );
    // Ids that skip inside a push: the run stops before the gap, the next call refuses it.
    let mut m = muts(2..=3);
    m.extend(muts(5..=6));
    let out = log
        .push_run(id, "g", "c", &m, None, RunSource::Push)
        .await
        .unwrap();
    assert!(matches!(out, RunOutcome::Applied { ref range, .. } if range.last == 3));
    let err = log
        .push_run(id, "g", "c", &m, None, RunSource::Push)
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        LogError::MutationGap {
            expected: 4,
            got: 5,
            ..
        }
    ));
    assert_eq!(log.last_mutation(id, "c").await.unwrap().unwrap().last, 3);
    let err = log
        .push_run(id, "other", "c", &muts(4..=4), None, RunSource::Push)
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::ClientGroupMismatch { .. }), "{err}");
}

#[tokio::test]
async fn a_rejected_mutation_advances_the_client_and_changes_nothing() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let mut m = muts(1..=3);
    m[1].event = Err("cells[0].ref: is outside the sheet".into());
    let out = log
        .push_run(id, "g", "c", &m, None, RunSource::Push)
        .await
        .unwrap();
    let RunOutcome::Applied { range, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!(range.rejected, vec![2]);
    // Only rejected mutations: still one entry, so a pull's cookie moves past it.
    let only_bad = vec![PushedMutation {
        id: 4,
        event: Err("bad".into()),
        base: None,
        then: Vec::new(),
    }];
    let out = log
        .push_run(id, "g", "c", &only_bad, None, RunSource::Push)
        .await
        .unwrap();
    assert!(matches!(out, RunOutcome::Applied { ref range, .. } if range.rejected == [4]));
    let found = log.find_mutation(id, "c", 4).await.unwrap().unwrap();
    assert_eq!((found.seq, found.rejected.clone()), (2, vec![4]));
}

#[tokio::test]
async fn a_long_run_is_split_across_entries_within_the_limits() {
    let log = mem_log();
    let id = log.create().await.unwrap().log;
    let seqs = push_all(&log, id, "g", "c", &muts(1..=2500)).await.unwrap();
    assert_eq!(seqs, vec![1, 2, 3], "1000 + 1000 + 500");
    assert_eq!(
        log.last_mutation(id, "c").await.unwrap().unwrap().last,
        2500
    );
    let _ = SetCells { cells: vec![] };
}

#[tokio::test]
async fn lost_responses_and_faults_never_apply_a_mutation_twice() {
    let mut p = FaultProfile::named("hostile").unwrap();
    p.lost_response = 0.3;
    p.stale_for = std::time::Duration::from_millis(5);
    let store = FaultyLogStore::new(MemLogStore::new(), Faults::new(p, 23));
    let log = Arc::new(EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap());
    let id = log.create().await.unwrap().log;
    // Four clients of two groups, each pushing 40 mutations in overlapping batches from two
    // tasks at once (a tab and its retry), retrying throttled calls as a client would.
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let log = log.clone();
            tokio::spawn(async move {
                let client = format!("c{}", t % 4);
                let group = format!("g{}", t % 2);
                for end in (5..=40).step_by(5) {
                    let batch = muts(1..=end);
                    loop {
                        match push_all(&log, id, &group, &client, &batch).await {
                            Ok(_) => break,
                            Err(LogError::Store(e)) if e.is_retryable() => continue,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    for c in 0..4 {
        // The profile throttles queries too; a client would retry.
        let newest = loop {
            match log.last_mutation(id, &format!("c{c}")).await {
                Err(LogError::Store(e)) if e.is_retryable() => continue,
                other => break other.unwrap(),
            }
        };
        assert_eq!(newest.map(|r| r.last), Some(40));
    }
    // Past the window in which injected stale reads may hide the newest entries.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let page = loop {
        match log.read_since(id, 0, 1000).await {
            Err(LogError::Store(e)) if e.is_retryable() => continue,
            other => break other.unwrap(),
        }
    };
    let mut seen: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for e in &page.entries[1..] {
        let EntryBody::Mutations(m) = EntryBody::decode(e.kind.0, e.version, &e.body).unwrap()
        else {
            panic!("not a mutations entry")
        };
        seen.entry(m.client.clone())
            .or_default()
            .extend(m.applied.iter().map(|m| m.id));
    }
    assert_eq!(seen.len(), 4);
    for (client, ids) in seen {
        assert_eq!(ids, (1..=40).collect::<Vec<_>>(), "client {client}");
    }
}

#[tokio::test]
async fn a_replay_may_start_a_client_late_but_never_twice() {
    // Latency on half the calls, so the two replays below interleave their reads and writes.
    let mut p = FaultProfile::named("none").unwrap();
    p.latency_spike = 0.5;
    p.spike = std::time::Duration::from_millis(3);
    let store = FaultyLogStore::new(MemLogStore::new(), Faults::new(p, 31));
    let log = Arc::new(EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).unwrap());
    let id = log.create().await.unwrap().log;
    // A client new to this log, replayed from its mutation 5: its first range is keyed 1.
    let out = log
        .push_run(id, "g", "c", &muts(5..=8), None, RunSource::Replay)
        .await
        .unwrap();
    let RunOutcome::Applied { range, .. } = out else {
        panic!("{out:?}")
    };
    assert_eq!((range.key, range.first, range.last), (1, 5, 8));
    assert_eq!(log.find_mutation(id, "c", 6).await.unwrap().unwrap().seq, 1);
    assert_eq!(log.find_mutation(id, "c", 3).await.unwrap(), None);
    // The client's own push of mutation 1 is no longer a new start: 1 <= 8 is skipped.
    assert!(matches!(
        log.push_run(id, "g", "c", &muts(1..=1), None, RunSource::Push)
            .await
            .unwrap(),
        RunOutcome::AlreadyApplied { .. }
    ));
    assert_eq!(log.last_mutation_before(id, "c", 2).await.unwrap(), 8);

    // Two replays that start another client at different ids, at once: one first range wins,
    // the other continues after it or finds itself applied. No id lands twice.
    for round in 0..20 {
        let client = format!("r{round}");
        let (a, b) = (log.clone(), log.clone());
        let (ca, cb) = (client.clone(), client.clone());
        let ta = tokio::spawn(async move { push_all_replay(&a, id, &ca, &muts(5..=8)).await });
        let tb = tokio::spawn(async move { push_all_replay(&b, id, &cb, &muts(7..=9)).await });
        ta.await.unwrap().unwrap();
        tb.await.unwrap().unwrap();
        let page = log.read_since(id, 0, 10_000).await.unwrap();
        let mut ids = Vec::new();
        for e in &page.entries {
            if let Ok(EntryBody::Mutations(m)) = EntryBody::decode(e.kind.0, e.version, &e.body)
                && m.client == client
            {
                ids.extend(m.applied.iter().map(|m| m.id));
            }
        }
        let distinct: std::collections::BTreeSet<u64> = ids.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            ids.len(),
            "round {round}: an id applied twice: {ids:?}"
        );
        assert_eq!(ids.last(), Some(&9));
        assert!(ids == [5, 6, 7, 8, 9] || ids == [7, 8, 9], "{ids:?}");
    }
}

async fn push_all_replay<S: LogStore, P: PayloadStore>(
    log: &EventLog<S, P>,
    id: LogId,
    client: &str,
    m: &[PushedMutation],
) -> Result<(), LogError> {
    loop {
        match log
            .push_run(id, "g", client, m, None, RunSource::Replay)
            .await?
        {
            RunOutcome::Applied { .. } => {}
            RunOutcome::AlreadyApplied { .. } => return Ok(()),
        }
    }
}

#[tokio::test]
async fn a_mutation_over_the_entry_limit_is_rejected_and_the_client_moves_on() {
    let log = mem_log();
    let limit = log.config().max_body_bytes;
    let id = log.create().await.unwrap().log;
    let huge = big_set(44_000);
    assert!(
        huge.encode().2.len() > 4 * limit,
        "the test mutation is not oversize"
    );
    let m = vec![
        PushedMutation {
            id: 1,
            event: Ok(set(1.0)),
            base: None,
            then: Vec::new(),
        },
        PushedMutation {
            id: 2,
            event: Ok(huge),
            base: None,
            then: Vec::new(),
        },
        PushedMutation {
            id: 3,
            event: Ok(set(3.0)),
            base: None,
            then: Vec::new(),
        },
    ];
    let out = log
        .push_run(id, "g", "c", &m, None, RunSource::Push)
        .await
        .unwrap();
    let RunOutcome::Applied {
        range, rejected, ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!((range.first, range.last), (1, 3));
    assert_eq!(range.rejected, vec![2]);
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].reason.starts_with("entry-too-large"),
        "{rejected:?}"
    );
    assert_eq!(log.last_mutation(id, "c").await.unwrap().unwrap().last, 3);
    // The same rule holds for a replayed run.
    let out = log
        .push_run(
            id,
            "g",
            "c2",
            &[PushedMutation {
                id: 7,
                event: Ok(big_set(44_000)),
                base: None,
                then: Vec::new(),
            }],
            None,
            RunSource::Replay,
        )
        .await
        .unwrap();
    assert!(matches!(out, RunOutcome::Applied { ref range, .. } if range.rejected == [7]));
    // Every entry written stays within the rule.
    let page = log.read_since(id, 0, 100).await.unwrap();
    for e in &page.entries {
        assert!(
            e.body.len() <= limit,
            "entry {} is {} bytes",
            e.seq,
            e.body.len()
        );
    }
}

#[tokio::test]
async fn a_run_is_split_so_no_entry_exceeds_a_low_entry_limit() {
    let cfg = LogConfig {
        max_body_bytes: 40 * 1024,
        ..LogConfig::default()
    };
    let log = EventLog::new(MemLogStore::new(), MemPayloadStore::new(), cfg).unwrap();
    let id = log.create().await.unwrap().log;
    // Ten mutations of about 16 KB each: 160 KB, under the 256 KB run target but four times the
    // entry limit.
    let m: Vec<PushedMutation> = (1..=10)
        .map(|id| PushedMutation {
            id,
            event: Ok(big_set(150)),
            base: None,
            then: Vec::new(),
        })
        .collect();
    let seqs = push_all(&log, id, "g", "c", &m).await.unwrap();
    assert!(seqs.len() >= 4, "split into {} entries", seqs.len());
    let page = log.read_since(id, 0, 100).await.unwrap();
    let mut applied = 0;
    for e in &page.entries {
        assert!(
            e.body.len() <= 40 * 1024,
            "entry {} is {} bytes",
            e.seq,
            e.body.len()
        );
        if let Ok(EntryBody::Mutations(run)) = EntryBody::decode(e.kind.0, e.version, &e.body) {
            assert!(run.rejected().is_empty());
            applied += run.applied.len();
        }
    }
    assert_eq!(applied, 10);
}

//! Pushes through the sync writer's group commit in the history checker: one task plays the
//! sheet's one writer (the FIFO queue's consumer) for a handful of Replicache clients, under the
//! same faults as the appenders and readers beside it. Like Replicache, a client keeps every
//! mutation until a batch's answer says it applied, and pushes everything pending each time. Like
//! SQS, a batch is sometimes delivered twice, and sometimes lands on a fresh writer instance that
//! remembers no client.
//!
//! Checked at the end, on the log as stored: each client's ids appear once each, in order,
//! without a gap, never beyond what the client made, and every id a batch acknowledged is there.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sheetlog_core::Entry;
use sheetlog_core::domain::LogId;
use sheetlog_core::log::{ClientPush, ClientResult, KnownClients, PushedMutation};
use sheetlog_core::sheet::EntryBody;

use sheetlog_core::log::EventLog;
use sheetlog_core::ports::{LogStore, PayloadStore};

use crate::fixtures::pushed_set;

/// The log as the chaos run builds it: over the fault-injecting stores, behind trait objects.
pub(super) type DynLog = EventLog<Arc<dyn LogStore>, Arc<dyn PayloadStore>>;

/// Replicache clients of the one writer.
const CLIENTS: usize = 8;

/// What the pushing clients made and were told.
#[derive(Debug, Default)]
pub(super) struct PushHistory {
    /// Batches written (each delivery counts).
    pub batches: u64,
    /// Per client: the highest id made.
    pub made: BTreeMap<String, u64>,
    /// Per client: the highest id a batch's answer said is applied.
    pub acked: BTreeMap<String, u64>,
    /// Failed group commits, by the error (its first 80 characters).
    pub errors: BTreeMap<String, u64>,
}

/// What the final log shows of the pushes.
#[derive(Debug, Default)]
pub(super) struct PushFindings {
    pub acknowledged: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub beyond_made: u64,
}

/// Client `client`'s mutation `id`: its own cell, B<client + 1>, set to `id`.
fn mutation(client: usize, id: u64) -> PushedMutation {
    pushed_set(
        id,
        &[(format!("B{}", client + 1), serde_json::json!(id as f64))],
    )
}

/// The writer's loop: `batches` batches of pushes (a budget of its own: a group commit under
/// faults takes longer than an append, so sharing the appenders' budget would leave it a few).
pub(super) async fn run(log: Arc<DynLog>, id: LogId, batches: u64, seed: u64) -> PushHistory {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut h = PushHistory::default();
    let mut known = KnownClients::default();
    let names: Vec<String> = (0..CLIENTS).map(|c| format!("p{c}")).collect();
    for _ in 0..batches {
        // Some clients make one or two mutations and push everything they still hold.
        let mut pushes = Vec::new();
        for (c, name) in names.iter().enumerate() {
            if rng.random_range(0..100) >= 40 {
                continue;
            }
            let made = h.made.entry(name.clone()).or_default();
            *made += rng.random_range(1..=2);
            let from = h.acked.get(name).copied().unwrap_or(0) + 1;
            pushes.push(ClientPush {
                group: format!("g-{name}"),
                client: name.clone(),
                mutations: (from..=*made).map(|i| mutation(c, i)).collect(),
            });
        }
        if pushes.is_empty() {
            continue;
        }
        if rng.random_range(0..100) < 10 {
            // Delivered to another writer instance: it remembers nothing.
            known = KnownClients::default();
        }
        let deliveries = if rng.random_range(0..100) < 10 { 2 } else { 1 };
        for _ in 0..deliveries {
            h.batches += 1;
            match log.push_batch_known(id, &pushes, None, &mut known).await {
                Ok(out) => {
                    for (p, r) in pushes.iter().zip(&out.clients) {
                        if let ClientResult::Done { last, .. } = r {
                            let acked = h.acked.entry(p.client.clone()).or_default();
                            *acked = (*acked).max(*last);
                        }
                    }
                }
                // The outcome is unknown (throttled, out of attempts, an answer lost): the
                // clients keep their mutations and push them again.
                Err(e) => {
                    let kind: String = e.to_string().chars().take(80).collect();
                    *h.errors.entry(kind).or_default() += 1;
                }
            }
            // As the writer's handler does after each batch, failed or not: index completed
            // windows, so the runs past the index mark stay few. A failure leaves them for later.
            let _ = log.index_known(id, &mut known).await;
        }
    }
    h
}

/// Each client's ids in log order, from the runs the log's entries record.
pub(super) fn check(all: &[Entry], h: &PushHistory, note: &mut impl FnMut(String)) -> PushFindings {
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in all {
        let Ok(body) = EntryBody::decode(e.kind.0, e.version, &e.body) else {
            continue;
        };
        for run in body.runs() {
            seen.entry(run.client.clone())
                .or_default()
                .extend(run.first..=run.last);
        }
    }
    let mut f = PushFindings {
        acknowledged: h.acked.values().sum(),
        ..PushFindings::default()
    };
    for (client, made) in &h.made {
        let ids = seen.get(client).map(Vec::as_slice).unwrap_or_default();
        for (i, id) in ids.iter().enumerate() {
            let want = i as u64 + 1;
            if *id < want {
                f.duplicates += 1;
                note(format!("push: {client}'s id {id} is in the log again"));
            } else if *id > want {
                f.reordered += 1;
                note(format!("push: {client}'s id {id} is where {want} belongs"));
            }
        }
        let top = ids.last().copied().unwrap_or(0);
        if top > *made {
            f.beyond_made += 1;
            note(format!("push: {client} made {made} but the log has {top}"));
        }
        let acked = h.acked.get(client).copied().unwrap_or(0);
        if (ids.len() as u64) < acked {
            f.lost += 1;
            note(format!(
                "push: {client} was told {acked} applied, the log has {}",
                ids.len()
            ));
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use sheetlog_core::domain::EntryType;
    use sheetlog_core::sheet::mutations::{Mutation, MutationBatch, Mutations};

    use super::*;

    /// A log entry recording `runs` of (client, first, last).
    fn entry(seq: u64, runs: &[(&str, u64, u64)]) -> Entry {
        let batch = MutationBatch {
            runs: runs
                .iter()
                .map(|(client, first, last)| Mutations {
                    group: format!("g-{client}"),
                    client: (*client).to_owned(),
                    first: *first,
                    last: *last,
                    applied: (*first..=*last)
                        .map(|id| Mutation {
                            id,
                            event: mutation(0, id).event.expect("a set"),
                        })
                        .collect(),
                    sent: Vec::new(),
                })
                .collect(),
        };
        let (code, version, body) = batch.encode();
        Entry {
            seq,
            segment: 0,
            num: seq,
            created: 0,
            kind: EntryType(code),
            version,
            body: body.into(),
            payload: None,
            snapshot_root: None,
        }
    }

    fn history(made: &[(&str, u64)], acked: &[(&str, u64)]) -> PushHistory {
        PushHistory {
            batches: 1,
            errors: BTreeMap::new(),
            made: made.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect(),
            acked: acked.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect(),
        }
    }

    #[test]
    fn a_clean_log_has_no_findings() {
        let all = [
            entry(1, &[("a", 1, 2), ("b", 1, 1)]),
            entry(2, &[("a", 3, 3)]),
        ];
        let f = check(
            &all,
            &history(&[("a", 4), ("b", 1)], &[("a", 3), ("b", 1)]),
            &mut |_| {},
        );
        assert_eq!(
            (f.lost, f.duplicates, f.reordered, f.beyond_made),
            (0, 0, 0, 0)
        );
        assert_eq!(f.acknowledged, 4);
    }

    #[test]
    fn duplicates_gaps_losses_and_inventions_are_each_found() {
        let all = [
            entry(1, &[("a", 1, 2), ("b", 1, 1)]),
            // a's 2 again, b jumps to 3.
            entry(2, &[("a", 2, 2), ("b", 3, 3)]),
        ];
        let mut notes = Vec::new();
        let f = check(
            &all,
            // c was told 1 applied but has nothing; b's 3 was never made.
            &history(&[("a", 2), ("b", 2), ("c", 1)], &[("c", 1)]),
            &mut |n| notes.push(n),
        );
        assert_eq!(f.duplicates, 1, "{notes:?}");
        assert_eq!(f.reordered, 1, "{notes:?}");
        assert_eq!(f.beyond_made, 1, "{notes:?}");
        assert_eq!(f.lost, 1, "{notes:?}");
    }
}

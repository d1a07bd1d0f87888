//! Pulls of one sheet that arrive together share one read.
//!
//! A poke makes every open page of the sheet pull at once, and most of them hold the same cookie
//! (the sheet's previous head). In one process (the local stack's API, or a warm function that
//! is handed several pulls), the first such pull waits [`GATHER`] and then reads the entries
//! since the cookie once for everyone who asked with the same cookie meanwhile. Every pull that
//! shares a read arrived before the read started, so it sees every commit that had been
//! announced when it asked: no pull is answered from an older read than one it would have made
//! itself. A pull that arrives after the read started waits for the next one.
//!
//! When the shared read cannot answer (it is undecided, failed, or its leader went away), each
//! pull goes on alone, as if it had not waited.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sheetlog_core::domain::LogId;
use sheetlog_core::log::EntriesPage;
use tokio::sync::watch;

/// How long the first pull of a cookie waits for others to join its read.
pub const GATHER: Duration = Duration::from_millis(10);
/// Gatherings open at once, past which pulls read alone.
const MAX_OPEN: usize = 10_000;

/// What a shared read gave: the entries since the cookie, or nothing usable.
type Shared = Option<Arc<EntriesPage>>;
/// A gathering's result, once its read is done.
type Gathering = watch::Receiver<Option<Shared>>;

#[derive(Debug, Default)]
pub struct PullGather {
    /// The gathering each (log, cookie) has open: joined until its read starts.
    open: Mutex<HashMap<(LogId, u64), Gathering>>,
}

impl PullGather {
    /// The entries since `cookie`, read by `read` once for all pulls of the same log and cookie
    /// that arrive within [`GATHER`] of the first. `None`: the caller reads alone.
    pub async fn since<F, Fut>(&self, log: LogId, cookie: u64, read: F) -> Shared
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Option<EntriesPage>>,
    {
        // Ok: a gathering to join; Err(Some): this pull leads a new one; Err(None): read alone.
        let joined = match self.open.lock() {
            Ok(mut open) => match open.get(&(log, cookie)) {
                Some(rx) => Ok(rx.clone()),
                None if open.len() >= MAX_OPEN => Err(None),
                None => {
                    let (tx, rx) = watch::channel(None);
                    open.insert((log, cookie), rx);
                    Err(Some(tx))
                }
            },
            Err(_) => Err(None),
        };
        match joined {
            Ok(mut rx) => match rx.wait_for(Option::is_some).await {
                Ok(shared) => shared.clone().flatten(),
                // The leader went away before reading.
                Err(_) => None,
            },
            Err(None) => read().await.map(Arc::new),
            Err(Some(tx)) => {
                tokio::time::sleep(GATHER).await;
                // Closed to newcomers before the read starts: whoever joined asked before it.
                if let Ok(mut open) = self.open.lock() {
                    open.remove(&(log, cookie));
                }
                let page = read().await.map(Arc::new);
                let _ = tx.send(Some(page.clone()));
                page
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn page(next_seq: u64) -> EntriesPage {
        EntriesPage {
            entries: Vec::new(),
            next_seq,
            complete: true,
            units: Default::default(),
        }
    }

    #[tokio::test]
    async fn pulls_that_arrive_together_share_one_read() {
        let gather = Arc::new(PullGather::default());
        let reads = Arc::new(AtomicU32::new(0));
        let log = LogId::new_random();
        let pulls: Vec<_> = (0..20)
            .map(|_| {
                let (gather, reads) = (gather.clone(), reads.clone());
                tokio::spawn(async move {
                    gather
                        .since(log, 7, || async {
                            reads.fetch_add(1, Ordering::SeqCst);
                            Some(page(9))
                        })
                        .await
                })
            })
            .collect();
        for p in pulls {
            assert_eq!(p.await.unwrap().unwrap().next_seq, 9);
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
        // Another cookie, or a pull after the read started, reads again.
        let again = gather
            .since(log, 7, || async {
                reads.fetch_add(1, Ordering::SeqCst);
                Some(page(10))
            })
            .await;
        assert_eq!(again.unwrap().next_seq, 10, "not an older read");
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_pull_that_arrives_while_the_read_runs_does_not_share_it() {
        let gather = Arc::new(PullGather::default());
        let log = LogId::new_random();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let (finish_tx, finish_rx) = tokio::sync::oneshot::channel::<()>();
        let first = {
            let gather = gather.clone();
            tokio::spawn(async move {
                gather
                    .since(log, 3, || async move {
                        let _ = started_tx.send(());
                        let _ = finish_rx.await;
                        Some(page(4))
                    })
                    .await
            })
        };
        started_rx.await.unwrap();
        // The first read has started (before a commit this pull was told of, say): this pull
        // must make its own read.
        let second = gather.since(log, 3, || async { Some(page(5)) }).await;
        assert_eq!(second.unwrap().next_seq, 5);
        finish_tx.send(()).unwrap();
        assert_eq!(first.await.unwrap().unwrap().next_seq, 4);
    }

    #[tokio::test]
    async fn a_shared_read_that_cannot_answer_leaves_each_pull_to_read_alone() {
        let gather = Arc::new(PullGather::default());
        let log = LogId::new_random();
        let pulls: Vec<_> = (0..5)
            .map(|_| {
                let gather = gather.clone();
                tokio::spawn(async move { gather.since(log, 1, || async { None }).await })
            })
            .collect();
        for p in pulls {
            assert!(p.await.unwrap().is_none());
        }
    }
}

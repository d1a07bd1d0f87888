//! An SQS FIFO batch of queued pushes → one group commit per log → batch item failures.
//!
//! - A message that cannot be read (not a queued push, a stored push that is gone or does not
//!   parse) is poison: logged and dropped, never retried — the same bytes would fail the same way,
//!   and the client re-pushes its pending mutations anyway.
//! - A log's readable messages are merged into one push per client and written by
//!   [`EventLog::push_batch`]; clients whose mutations cannot be applied as sent (a gap, an
//!   unknown client, another group's client) are refused and logged, the others are applied.
//! - A transient failure (throttling, a timeout, contention) is retried a few times here; if it
//!   persists, every message of that log in the batch is reported as a batch item failure (later
//!   messages of a FIFO group must not overtake the failed one), and SQS redelivers them after
//!   the visibility timeout, up to the dead-letter queue. Other logs' messages go on.
//! - Redelivery after a crash between the append and the delete applies nothing twice: the
//!   group commit skips what each client already has.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use sheetlog_core::LogError;
use sheetlog_core::aws::{DynamoLogStore, DynamoPurge, S3Bucket, s3_client};
use sheetlog_core::config::{LogConfig, Resources};
use sheetlog_core::domain::LogId;
use sheetlog_core::error::StoreError;
use sheetlog_core::log::{
    Backoff, BatchOutcome, ClientResult, EventLog, KnownClients, SegmentHint, index_due,
};
use sheetlog_core::poke::Poker;
use sheetlog_core::ports::{LogPurge, LogStore, PayloadStore};
use sheetlog_core::sync_queue::{PushMessage, QueuedPush, client_pushes};
use tracing::{debug, error, info, warn};

use crate::config::WriterConfig;
use crate::early_delete::EarlyDelete;

/// The writer's log: the AWS adapters, or the same wrapped in the fault-injecting adapter.
pub type WriterLog = EventLog<Arc<dyn LogStore>, Arc<dyn PayloadStore>>;

/// Hints kept per warm process; cleared wholesale past this many logs.
const MAX_HINTS: usize = 10_000;

/// The longest wait between tries of a group commit (the first is `retry_delay`, doubling).
const MAX_RETRY_DELAY: std::time::Duration = std::time::Duration::from_secs(5);

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageOutcome {
    /// Its pushes are applied (or were already): delete it.
    Applied,
    /// It cannot be read or its log does not exist: dropped, not retried.
    Poison(String),
    /// Not applied yet (a transient failure, or an earlier message of its log failed): a batch
    /// item failure, redelivered by SQS.
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageResult {
    pub message_id: String,
    pub log: Option<LogId>,
    pub outcome: MessageOutcome,
    /// Already deleted from the queue by the handler ([`EarlyDelete`]).
    pub deleted: bool,
}

impl MessageResult {
    /// Whether the message stays on the queue (reported as a batch item failure).
    pub fn keep(&self) -> bool {
        matches!(self.outcome, MessageOutcome::Failed(_))
    }
}

#[derive(Debug)]
pub struct Handler {
    log: WriterLog,
    payloads: Arc<dyn PayloadStore>,
    cfg: WriterConfig,
    hints: Mutex<HashMap<LogId, SegmentHint>>,
    /// Per log, its clients as this process's last group commit left them (see
    /// [`KnownClients`]): a batch that finds the log there reads no client range again.
    known: Mutex<HashMap<LogId, KnownClients>>,
    /// Announces each batch's commit on the sheet's AppSync Events channel, when configured.
    poker: Option<Arc<Poker>>,
    /// Per log, the index mark this process last moved it to (a batch that ran meanwhile may
    /// put back a `known` with an older one).
    marks: Mutex<HashMap<LogId, u64>>,
    /// Logs being indexed now, by one poller: another skips them.
    indexing: Mutex<std::collections::HashSet<LogId>>,
    /// Where deleted logs' tombstones are read: a push to one is dropped.
    tombstones: Option<Arc<dyn LogPurge>>,
}

/// A message as received: its position in the batch, its push, its receipt handle.
type Received = (usize, PushMessage, Option<String>);

/// A message of one log, read or not.
enum Loaded {
    Push(QueuedPush),
    Poison(String),
    Failed(String),
}

impl Handler {
    pub fn new(log: WriterLog, payloads: Arc<dyn PayloadStore>, cfg: WriterConfig) -> Self {
        Self {
            log,
            payloads,
            cfg,
            hints: Mutex::new(HashMap::new()),
            known: Mutex::new(HashMap::new()),
            poker: None,
            marks: Mutex::new(HashMap::new()),
            indexing: Mutex::new(std::collections::HashSet::new()),
            tombstones: None,
        }
    }

    /// Reads each log's tombstone before its group commit: pushes to a deleted log are dropped
    /// (deleted from the queue, never retried), so a writer cannot refill a deleted sheet.
    pub fn with_tombstones(mut self, tombstones: Arc<dyn LogPurge>) -> Self {
        self.tombstones = Some(tombstones);
        self
    }

    /// Pokes the sheet's channel after each group commit through `poker`.
    pub fn with_poker(mut self, poker: Arc<Poker>) -> Self {
        self.poker = Some(poker);
        self
    }

    /// Builds the handler from SDK configuration and resource names (no Dedupe or Pending
    /// table: pushes use neither).
    pub fn from_sdk(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: WriterConfig,
    ) -> anyhow::Result<Self> {
        Self::from_sdk_wrapped(sdk, resources, log_cfg, cfg, |s, p| (s, p))
    }

    /// As [`from_sdk`](Self::from_sdk), with the stores passed through `wrap` first (the local
    /// stack wraps them in the fault-injecting adapter).
    pub fn from_sdk_wrapped(
        sdk: &aws_config::SdkConfig,
        resources: &Resources,
        log_cfg: LogConfig,
        cfg: WriterConfig,
        wrap: impl FnOnce(
            Arc<dyn LogStore>,
            Arc<dyn PayloadStore>,
        ) -> (Arc<dyn LogStore>, Arc<dyn PayloadStore>),
    ) -> anyhow::Result<Self> {
        let dynamo = aws_sdk_dynamodb::Client::new(sdk);
        let clients_table = resources.require_clients_table()?;
        let tombstones = DynamoPurge::tombstones(dynamo.clone(), clients_table);
        let store = DynamoLogStore::new(dynamo, &resources.entry_table, &resources.segment_table)
            .with_clients_table(clients_table);
        let bucket = S3Bucket::new(s3_client(sdk), &resources.bucket);
        let (store, payloads) = wrap(Arc::new(store), Arc::new(bucket));
        let log = EventLog::new(store, payloads.clone(), log_cfg)?;
        Ok(Self::new(log, payloads, cfg).with_tombstones(Arc::new(tombstones)))
    }

    pub fn log(&self) -> &WriterLog {
        &self.log
    }

    /// Handles a batch: the messages to redeliver are the batch item failures.
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        self.handle_with(event, None).await
    }

    /// As [`handle`](Self::handle), deleting handled messages early through `early`.
    pub async fn handle_with(
        &self,
        event: SqsEvent,
        early: Option<&dyn EarlyDelete>,
    ) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for r in self.handle_detailed_with(event, early).await {
            if r.keep() {
                response.add_failure(r.message_id);
            }
        }
        response
    }

    /// Handles a batch; one result per message, in the batch's order.
    pub async fn handle_detailed(&self, event: SqsEvent) -> Vec<MessageResult> {
        self.handle_detailed_with(event, None).await
    }

    /// As [`handle_detailed`](Self::handle_detailed), deleting each log's handled messages
    /// through `early` as soon as its group commit is written, before its poke (see
    /// [`crate::early_delete`]); those results say `deleted`.
    pub async fn handle_detailed_with(
        &self,
        event: SqsEvent,
        early: Option<&dyn EarlyDelete>,
    ) -> Vec<MessageResult> {
        let mut results: Vec<MessageResult> = Vec::with_capacity(event.records.len());
        // Each log's messages (their positions in `results`, their receipt handles), logs in
        // order of first appearance.
        let mut logs: Vec<(LogId, Vec<Received>)> = Vec::new();
        for record in event.records {
            let message_id = record.message_id.unwrap_or_default();
            let receipt = record.receipt_handle;
            let parsed = match record.body.as_deref() {
                Some(body) => PushMessage::parse(body).map_err(|e| e.to_string()),
                None => Err("a message with no body".to_owned()),
            };
            match parsed {
                Ok(m) => {
                    let log = m.log();
                    results.push(MessageResult {
                        message_id,
                        log: Some(log),
                        outcome: MessageOutcome::Applied,
                        deleted: false,
                    });
                    let at = results.len() - 1;
                    match logs.iter_mut().find(|(l, _)| *l == log) {
                        Some((_, ms)) => ms.push((at, m, receipt)),
                        None => logs.push((log, vec![(at, m, receipt)])),
                    }
                }
                Err(reason) => {
                    error!(
                        message_id,
                        reason, "dropping a message that is not a queued push"
                    );
                    results.push(MessageResult {
                        message_id,
                        log: None,
                        outcome: MessageOutcome::Poison(reason),
                        deleted: false,
                    });
                }
            }
        }
        let outcomes = futures::future::join_all(
            logs.into_iter()
                .map(|(log, ms)| self.handle_log(log, ms, early)),
        )
        .await;
        for (at, outcome, deleted) in outcomes.into_iter().flatten() {
            if let Some(r) = results.get_mut(at) {
                r.outcome = outcome;
                r.deleted = deleted;
            }
        }
        results
    }

    /// One log's messages, in order: read them, then one group commit, then (with `early`) the
    /// handled messages deleted, then the poke. Each message's outcome and whether it was
    /// deleted.
    async fn handle_log(
        &self,
        log: LogId,
        messages: Vec<Received>,
        early: Option<&dyn EarlyDelete>,
    ) -> Vec<(usize, MessageOutcome, bool)> {
        let receipts: HashMap<usize, String> = messages
            .iter()
            .filter_map(|(at, _, r)| r.clone().map(|r| (*at, r)))
            .collect();
        let (out, done) = self
            .apply_log(log, messages.into_iter().map(|(at, m, _)| (at, m)))
            .await;
        let t0 = std::time::Instant::now();
        let mut deleted = false;
        let handled: Vec<String> = out
            .iter()
            .filter(|(_, o)| !matches!(o, MessageOutcome::Failed(_)))
            .filter_map(|(at, _)| receipts.get(at).cloned())
            .collect();
        if let (Some(early), false) = (early, handled.is_empty()) {
            match early.delete(&handled).await {
                Ok(()) => deleted = true,
                // Deleted again after the handler returns, or redelivered and skipped.
                Err(e) => warn!(log = %log, error = %e, "deleting handled pushes early failed"),
            }
        }
        let t1 = std::time::Instant::now();
        if let Some(done) = &done {
            self.poke(log, done).await;
        }
        let t2 = std::time::Instant::now();
        // After a failed commit too: a throttled one keeps what it read of the log, and
        // indexing is what keeps the next commit's read past the mark short.
        self.index_after(log).await;
        debug!(
            log = %log,
            delete_ms = (t1 - t0).as_millis() as u64,
            poke_ms = (t2 - t1).as_millis() as u64,
            index_ms = t2.elapsed().as_millis() as u64,
            "after the group commit"
        );
        out.into_iter()
            .map(|(at, o)| {
                let gone = deleted
                    && !matches!(o, MessageOutcome::Failed(_))
                    && receipts.contains_key(&at);
                (at, o, gone)
            })
            .collect()
    }

    /// One log's messages, in order: read them, then one group commit. Each message's outcome,
    /// and the commit's outcome when it wrote.
    async fn apply_log(
        &self,
        log: LogId,
        messages: impl Iterator<Item = (usize, PushMessage)>,
    ) -> (Vec<(usize, MessageOutcome)>, Option<BatchOutcome>) {
        let mut out = Vec::new();
        let mut pushes: Vec<(usize, QueuedPush)> = Vec::new();
        let mut failed: Option<String> = None;
        for (at, m) in messages {
            if let Some(reason) = &failed {
                // A FIFO group's later messages must not overtake a failed one.
                out.push((
                    at,
                    MessageOutcome::Failed(format!("an earlier message failed: {reason}")),
                ));
                continue;
            }
            match self.load(m).await {
                Loaded::Push(p) if p.log == log => pushes.push((at, p)),
                Loaded::Push(p) => {
                    let reason = format!("stored push names log {}, not {log}", p.log);
                    error!(log = %log, reason, "dropping a queued push");
                    out.push((at, MessageOutcome::Poison(reason)));
                }
                Loaded::Poison(reason) => {
                    error!(log = %log, reason, "dropping a queued push");
                    out.push((at, MessageOutcome::Poison(reason)));
                }
                Loaded::Failed(reason) => {
                    warn!(log = %log, reason, "reading a stored push failed; it will be retried");
                    out.push((at, MessageOutcome::Failed(reason.clone())));
                    failed = Some(reason);
                }
            }
        }
        if pushes.is_empty() {
            return (out, None);
        }
        if let Some(outcome) = self.deleted_outcome(log).await {
            out.extend(pushes.into_iter().map(|(at, _)| (at, outcome.clone())));
            return (out, None);
        }
        let mut done = None;
        let outcome = match self.commit(log, &pushes).await {
            Ok(d) => {
                done = Some(d);
                MessageOutcome::Applied
            }
            Err(LogError::LogNotFound(_)) => {
                error!(log = %log, "dropping pushes to a log that does not exist");
                MessageOutcome::Poison(format!("log {log} does not exist"))
            }
            Err(e) => {
                for (_, p) in &pushes {
                    error!(log = %log, group = p.group, error = %e, "push not applied; it will be retried");
                }
                MessageOutcome::Failed(e.to_string())
            }
        };
        out.extend(pushes.into_iter().map(|(at, _)| (at, outcome.clone())));
        (out, done)
    }

    /// What becomes of a log's pushes when the log was deleted: dropped (a tombstone is never
    /// removed, so a retry could only fail the same way); `Failed` when the tombstone could not
    /// be read (retried like a failed commit); `None` for a live log. One strong GetItem.
    async fn deleted_outcome(&self, log: LogId) -> Option<MessageOutcome> {
        let tombstones = self.tombstones.as_ref()?;
        match sheetlog_core::log::purge::check_live(tombstones.as_ref(), log).await {
            Ok(()) => None,
            Err(LogError::LogDeleted(_)) => {
                warn!(log = %log, "dropping pushes to a deleted log");
                Some(MessageOutcome::Poison(format!("log {log} was deleted")))
            }
            Err(e) => {
                warn!(log = %log, error = %e, "reading the log's tombstone failed; the pushes will be retried");
                Some(MessageOutcome::Failed(e.to_string()))
            }
        }
    }

    /// The push a message carries, read from the bucket when it was stored there.
    async fn load(&self, m: PushMessage) -> Loaded {
        let stored = match m {
            PushMessage::Inline(p) => return Loaded::Push(p),
            PushMessage::Stored(s) => s,
        };
        match self.payloads.get(&stored.s3).await {
            Ok(bytes) => match QueuedPush::parse(&bytes) {
                Ok(p) => Loaded::Push(p),
                Err(e) => Loaded::Poison(format!("stored push {}: {e}", stored.s3)),
            },
            // Expired by the auto-delete rule: nothing left to apply (the client re-pushes).
            Err(StoreError::NotFound { key }) => {
                Loaded::Poison(format!("stored push {key} is gone"))
            }
            Err(e) => Loaded::Failed(e.to_string()),
        }
    }

    /// The group commit of one log's pushes, retried here on transient failures, then the
    /// snapshot trigger (the poke is the caller's).
    async fn commit(
        &self,
        log: LogId,
        pushes: &[(usize, QueuedPush)],
    ) -> Result<BatchOutcome, LogError> {
        let (clients, mismatched) = client_pushes(pushes.iter().map(|(_, p)| p));
        for (group, client) in mismatched {
            warn!(log = %log, group, client, "push refused: the client is claimed by another group in the same batch");
        }
        let mut backoff = Backoff::between(self.cfg.retry_delay, MAX_RETRY_DELAY);
        let mut attempt = 1;
        let t0 = std::time::Instant::now();
        // Taken out while this batch is written (FIFO delivery gives a log's messages to one
        // batch at a time), put back after: an error leaves it empty.
        let mut known = self
            .known
            .lock()
            .ok()
            .and_then(|mut k| k.remove(&log))
            .unwrap_or_default();
        let done = loop {
            match self
                .log
                .push_batch_known(log, &clients, self.hint(log), &mut known)
                .await
            {
                Ok(done) => break Ok(done),
                Err(e) if transient(&e) && attempt < self.cfg.attempts => {
                    warn!(log = %log, attempt, error = %e, "group commit failed; retrying");
                    backoff.sleep().await;
                    attempt += 1;
                }
                Err(e) => break Err(e),
            }
        };
        let t1 = std::time::Instant::now();
        // Put back after a failure too: `push_batch_known` keeps only what is still exact
        // (through throttles and lost races), and indexing after the failed commit needs it.
        if let Ok(mut k) = self.known.lock() {
            if k.len() >= MAX_HINTS {
                k.clear();
            }
            k.insert(log, known);
        }
        let done = done?;
        self.report(log, &clients, &done);
        for a in &done.appended {
            self.remember_hint(log, a.hint);
            match self.log.snapshot_if_due(log, a, self.cfg.trigger).await {
                Ok(t) => {
                    if let Some(h) = t.hint {
                        self.remember_hint(log, h);
                    }
                    // Its Snapshot entry moved the head but no client's range: the clients
                    // remembered stay trusted (without this, every snapshot boundary made the
                    // next batches read each of their clients again).
                    if t.next_seq != a.next_seq
                        && let Ok(mut k) = self.known.lock()
                        && let Some(known) = k.get_mut(&log)
                    {
                        known.after_own_entry(t.next_seq);
                    }
                }
                // The append succeeded; a later append runs the check again.
                Err(e) => warn!(log = %log, error = %e, "snapshot trigger failed"),
            }
        }
        debug!(
            log = %log,
            attempts = attempt,
            commit_ms = (t1 - t0).as_millis() as u64,
            trigger_ms = t1.elapsed().as_millis() as u64,
            "group commit timings"
        );
        Ok(done)
    }

    /// Indexes the windows the log's entries completed (`docs/sync.md`, "Range items written
    /// later"), after the batch's messages are deleted and its poke sent: a window's range items
    /// (one per client that pushed in it) then never hold up the sheet's next batch. One poller
    /// per log at a time; a failure is logged, and the next batch's call tries again.
    async fn index_after(&self, log: LogId) {
        let due = self
            .known
            .lock()
            .ok()
            .and_then(|k| k.get(&log).and_then(KnownClients::index_due));
        let Some((mark, next_seq, at)) = due else {
            return;
        };
        let mark = match self.marks.lock().ok().and_then(|m| m.get(&log).copied()) {
            Some(m) => m.max(mark),
            None => mark,
        };
        if !index_due(mark, next_seq) {
            return;
        }
        if !self.indexing.lock().is_ok_and(|mut i| i.insert(log)) {
            return;
        }
        let mut units = sheetlog_core::domain::RequestUnits::default();
        let moved = self
            .log
            .index_deferred(log, mark, next_seq, at, &mut units)
            .await;
        if let Ok(mut i) = self.indexing.lock() {
            i.remove(&log);
        }
        match moved {
            Ok(m) => {
                if let Ok(mut marks) = self.marks.lock() {
                    if marks.len() >= MAX_HINTS {
                        marks.clear();
                    }
                    let e = marks.entry(log).or_insert(m);
                    *e = (*e).max(m);
                }
                if let Ok(mut k) = self.known.lock()
                    && let Some(known) = k.get_mut(&log)
                {
                    known.indexed(m);
                }
                debug!(log = %log, mark = m, wru = units.write, "deferred runs indexed");
            }
            Err(e) => warn!(log = %log, error = %e, "indexing deferred runs failed"),
        }
    }

    fn report(&self, log: LogId, clients: &[sheetlog_core::log::ClientPush], done: &BatchOutcome) {
        let mut applied = 0u64;
        for (c, r) in clients.iter().zip(&done.clients) {
            match r {
                ClientResult::Done { ranges, .. } => {
                    applied += ranges.iter().map(|r| r.last - r.first + 1).sum::<u64>();
                }
                ClientResult::Refused { error, .. } => {
                    warn!(log = %log, group = c.group, client = c.client, error = %error, "push refused");
                }
            }
        }
        info!(
            log = %log,
            clients = clients.len(),
            mutations = applied,
            entries = done.appended.len(),
            wru = done.units.write,
            "pushes written"
        );
    }

    /// One poke per group commit that appended anything: the sheet's next sequence after it
    /// (a Snapshot entry the trigger adds changes no cell, so it needs no announcing). Never
    /// fails: a failed publish is logged and counted by the [`Poker`].
    async fn poke(&self, log: LogId, done: &BatchOutcome) {
        if let (Some(poker), Some(next)) =
            (&self.poker, done.appended.iter().map(|a| a.next_seq).max())
        {
            poker.poke(log, next).await;
        }
    }

    fn hint(&self, log: LogId) -> Option<SegmentHint> {
        self.hints.lock().ok().and_then(|h| h.get(&log).copied())
    }

    fn remember_hint(&self, log: LogId, hint: SegmentHint) {
        if let Ok(mut h) = self.hints.lock() {
            if h.len() >= MAX_HINTS {
                h.clear();
            }
            h.insert(log, hint);
        }
    }
}

/// Whether a failed group commit may succeed if tried again soon.
fn transient(e: &LogError) -> bool {
    match e {
        LogError::Contention { .. } => true,
        LogError::Store(s) => s.is_retryable() || matches!(s, StoreError::Service { .. }),
        _ => false,
    }
}

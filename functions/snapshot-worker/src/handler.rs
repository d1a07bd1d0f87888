//! The SQS batch handler: each message is one [`SnapshotJob`]; the protocol's [`Outcome`] becomes
//! a queue action, and the response lists the messages that must stay on the queue.
//!
//! Message fates:
//! - finished (built, late duplicate, lost race, bogus job) → success: the event-source mapping
//!   (or the local driver) deletes it;
//! - completed → also, the log's next Snapshot entry, if it is already in the log and not built,
//!   is built next by the same invocation (and the one after it, while the invocation's time
//!   lasts), so a burst of snapshots builds one after another at the speed of the builds instead
//!   of each waiting out its own backoff behind the one before, or a queue round trip. A chained
//!   build that waits, hands off or fails goes on as a fresh job (sent as its own message
//!   would be); one found held by another invocation is left to it;
//! - handed off past the hop cap (`max_handoffs`) → parked: not sent again, logged at error
//!   level and counted in the `SnapshotJobsParked` metric; its pending item keeps the checkpoint
//!   for `sheetlog-maintenance reprocess`;
//! - deferred or handed off → a fresh copy of the job is sent with the wait as its delivery delay
//!   (at most SQS's 15 minutes) and the original counts as a success. Why a copy rather than the
//!   visibility change the protocol allows (`docs/design.md`): every receive counts towards the queue's redrive threshold (100),
//!   and a job can legitimately wait for hours behind an earlier snapshot or hand off many times
//!   in a long build. A copy starts at receive count 0, so only invocations that actually fail
//!   count, and a live job can never be pushed into the dead-letter queue by waiting. If sending
//!   the copy fails, the worker falls back to the visibility change — the message's visibility
//!   to the wait and report it failed — so the job is never lost. (Send, then delete: a crash in
//!   between leaves a duplicate, which the protocol absorbs.)
//! - error → reported failed, visible again after a short backoff that grows with the receive
//!   count; a job that keeps failing reaches the dead-letter queue after 100 receives and the
//!   queue's alarm fires;
//! - a body that is not a job at all (poison) → reported failed the same way, so it ends in the
//!   dead-letter queue for an operator to look at rather than vanishing.
//! - stopped by a step hook (fault-injection tests) → reported failed with no other action, as a
//!   killed process would leave it.

use std::time::{Duration, Instant};

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use sheetlog_core::aws::SqsJobQueue;
use sheetlog_core::domain::{SnapshotJob, now_secs};
use sheetlog_core::telemetry::metric;
use tracing::{error, info, warn};

use crate::protocol::{Outcome, Worker, WorkerError};

/// What happened to one message, for callers that want more than the batch response.
#[derive(Debug)]
pub struct MessageResult {
    pub message_id: String,
    pub job: Option<SnapshotJob>,
    pub result: Result<Outcome, WorkerError>,
    /// Whether the message is reported as failed (stays on the queue).
    pub keep: bool,
    /// Later snapshots of the log this invocation built after completing the message's.
    pub chained: u32,
}

#[derive(Debug, Clone)]
pub struct Handler {
    worker: Worker,
    queue: SqsJobQueue,
}

impl Handler {
    pub fn new(worker: Worker, queue: SqsJobQueue) -> Self {
        Self { worker, queue }
    }

    pub fn worker(&self) -> &Worker {
        &self.worker
    }

    /// Handles a batch; messages run one after another (the stack's batch size is 1).
    pub async fn handle(&self, event: SqsEvent, handoff_at: Instant) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for r in self.handle_detailed(event, handoff_at).await {
            if r.keep {
                response.add_failure(r.message_id);
            }
        }
        response
    }

    /// Like [`handle`](Self::handle), returning each message's outcome.
    pub async fn handle_detailed(
        &self,
        event: SqsEvent,
        handoff_at: Instant,
    ) -> Vec<MessageResult> {
        let mut out = Vec::with_capacity(event.records.len());
        for message in event.records {
            out.push(self.handle_message(message, handoff_at).await);
        }
        out
    }

    async fn handle_message(&self, message: SqsMessage, handoff_at: Instant) -> MessageResult {
        let message_id = message.message_id.clone().unwrap_or_default();
        let receipt = message.receipt_handle.as_deref();
        let receives: u32 = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        let job = match message.body.as_deref().map(SnapshotJob::from_json) {
            Some(Ok(job)) => job,
            Some(Err(e)) => {
                error!(message = %message_id, error = %e, "not a snapshot job; leaving it for the dead-letter queue");
                self.retry_later(receipt, receives).await;
                return MessageResult {
                    message_id,
                    job: None,
                    result: Ok(Outcome::Rejected {
                        reason: format!("malformed job: {e}"),
                    }),
                    keep: true,
                    chained: 0,
                };
            }
            None => {
                error!(message = %message_id, "message without a body");
                self.retry_later(receipt, receives).await;
                return MessageResult {
                    message_id,
                    job: None,
                    result: Ok(Outcome::Rejected {
                        reason: "no body".into(),
                    }),
                    keep: true,
                    chained: 0,
                };
            }
        };
        // Boxed: the build's future is deep, and a boxed one keeps the Lambda's stack and the
        // compiler's layout computation small.
        let result = Box::pin(self.worker.run(&job, handoff_at)).await;
        let mut chained = 0;
        let keep = match &result {
            Ok(outcome) => {
                info!(log = %job.log_id, segment = job.segment, entry = job.entry,
                    outcome = ?outcome, "job handled");
                match outcome {
                    Outcome::Deferred { delay, .. } => {
                        let job = job.deferred(now_secs());
                        metric(
                            "SnapshotJobWaitSeconds",
                            job.waited(now_secs()) as f64,
                            "Seconds",
                        );
                        self.requeue(job, *delay, receipt).await
                    }
                    Outcome::HandedOff { .. }
                        if job.handoffs >= self.worker.config().max_handoffs =>
                    {
                        error!(log = %job.log_id, segment = job.segment, entry = job.entry,
                            handoffs = job.handoffs, "snapshot job parked after too many hand-offs; \
                            run sheetlog-maintenance reprocess to send it again");
                        metric("SnapshotJobsParked", 1.0, "Count");
                        false
                    }
                    Outcome::HandedOff { .. } => {
                        self.requeue(job.handed_off(), Duration::ZERO, receipt)
                            .await
                    }
                    Outcome::Completed { .. } => {
                        chained = self.chain(&job, handoff_at).await;
                        false
                    }
                    Outcome::Rejected { reason } => {
                        error!(log = %job.log_id, segment = job.segment, entry = job.entry,
                            reason, "dropping a job that names no Snapshot entry");
                        false
                    }
                    Outcome::AlreadyComplete | Outcome::Duplicate | Outcome::LogDeleted => false,
                }
            }
            Err(WorkerError::Stopped(step)) => {
                warn!(log = %job.log_id, %step, "stopped by a step hook");
                true
            }
            Err(e) => {
                error!(log = %job.log_id, segment = job.segment, entry = job.entry,
                    receives, error = %e, "snapshot job failed; it will be retried");
                self.retry_later(receipt, receives).await;
                true
            }
        };
        MessageResult {
            message_id,
            job: Some(job),
            result,
            keep,
            chained,
        }
    }

    /// After a completion: builds the log's next unbuilt Snapshot entry, if there is one, in
    /// this invocation, and the one after it, until there is none or the invocation's time is up
    /// (`handoff_at`); the next one is then sent as a fresh job due now. A chained build that
    /// waits or hands off is re-sent as its message would be; one that fails is sent again due
    /// now, so it is retried (and counted) as a message of its own. Best effort throughout: the
    /// router's own message for each Snapshot entry is on its way too.
    async fn chain(&self, done: &SnapshotJob, handoff_at: Instant) -> u32 {
        let mut done = *done;
        let mut built = 0;
        loop {
            let next = match self.worker.next_snapshot(&done).await {
                Ok(Some(next)) => next,
                Ok(None) => return built,
                Err(e) => {
                    warn!(log = %done.log_id, error = %e, "looking for the next snapshot failed");
                    return built;
                }
            };
            if Instant::now() >= handoff_at {
                self.send_next(&next).await;
                return built;
            }
            let result = Box::pin(self.worker.run(&next, handoff_at)).await;
            info!(log = %next.log_id, segment = next.segment, entry = next.entry,
                outcome = ?result, "chained job handled");
            match result {
                Ok(Outcome::Completed { .. }) => built += 1,
                Ok(Outcome::AlreadyComplete) => {}
                Ok(Outcome::Deferred { delay, .. }) => {
                    self.requeue(next.deferred(now_secs()), delay, None).await;
                    return built;
                }
                Ok(Outcome::HandedOff { .. }) => {
                    self.requeue(next.handed_off(), Duration::ZERO, None).await;
                    return built;
                }
                Ok(Outcome::Duplicate | Outcome::Rejected { .. } | Outcome::LogDeleted)
                | Err(WorkerError::Stopped(_)) => return built,
                Err(e) => {
                    warn!(log = %next.log_id, segment = next.segment, entry = next.entry,
                        error = %e, "a chained snapshot failed; sending it as a job of its own");
                    self.send_next(&next).await;
                    return built;
                }
            }
            done = next;
        }
    }

    /// Sends `next` as a fresh job due now (best effort: the router's message is on its way).
    async fn send_next(&self, next: &SnapshotJob) {
        if let Err(e) = self.queue.send(next, Duration::ZERO).await {
            warn!(log = %next.log_id, error = %e, "sending the next snapshot job failed; the router's message will start it");
        } else {
            info!(log = %next.log_id, segment = next.segment, entry = next.entry, "sent the next snapshot job");
        }
    }

    /// Sends a fresh copy of `job` due after `delay`; returns whether the original must be kept
    /// (only when the copy could not be sent).
    async fn requeue(&self, job: SnapshotJob, delay: Duration, receipt: Option<&str>) -> bool {
        match self.queue.send(&job, delay).await {
            Ok(()) => false,
            Err(e) => {
                warn!(log = %job.log_id, error = %e, "re-sending the job failed; keeping the message instead");
                if let Some(r) = receipt
                    && let Err(e) = self.queue.change_visibility(r, delay).await
                {
                    warn!(error = %e, "changing visibility failed; the queue's timeout applies");
                }
                true
            }
        }
    }

    /// Makes a failed message visible again soon rather than after the queue's 30 minutes.
    async fn retry_later(&self, receipt: Option<&str>, receives: u32) {
        let cfg = self.worker.config();
        let wait = (cfg.error_retry * receives.max(1)).min(cfg.defer_max);
        if let Some(r) = receipt
            && let Err(e) = self.queue.change_visibility(r, wait).await
        {
            warn!(error = %e, "changing visibility failed; the queue's timeout applies");
        }
    }
}

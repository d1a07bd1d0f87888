//! The snapshot job message: what the stream router puts on the snapshot queue for each inserted
//! Snapshot entry, and what the snapshot worker (and the reprocess tool) read back.

use serde::{Deserialize, Serialize};

use super::LogId;

/// Build (or finish building) the snapshot of the Snapshot entry `entry` of segment `segment`.
///
/// Wire form: `{"logId":"<uuid>","segment":3,"entry":0}`, plus `"deferrals":n` once the worker
/// has deferred the job `n` times (it sets the backoff) with `"waitingSince"` (when the first
/// wait began), and `"handoffs":n` once a long build has handed itself off `n` times. Duplicates are expected: the router may
/// send one twice and SQS may deliver one twice; the worker's protocol absorbs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotJob {
    pub log_id: LogId,
    pub segment: u64,
    pub entry: u64,
    /// How often this job has been deferred behind other work (0 when the router sends it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deferrals: u32,
    /// How often the build has handed itself off to a fresh invocation (its hop count). Past the
    /// worker's cap the job is parked instead of sent round again.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub handoffs: u32,
    /// When the job first had to wait (Unix seconds); the age of a deferred job is measured
    /// from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<i64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl SnapshotJob {
    pub fn new(log_id: LogId, segment: u64, entry: u64) -> Self {
        Self {
            log_id,
            segment,
            entry,
            deferrals: 0,
            handoffs: 0,
            waiting_since: None,
        }
    }

    pub fn to_json(&self) -> String {
        // A struct of a UUID and integers always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(body: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(body)
    }

    /// The same job, counted as deferred once more at `now` (which starts its wait, if this is
    /// the first).
    pub fn deferred(self, now: i64) -> Self {
        Self {
            deferrals: self.deferrals.saturating_add(1),
            waiting_since: Some(self.waiting_since.unwrap_or(now)),
            ..self
        }
    }

    /// The same job, handed off once more.
    pub fn handed_off(self) -> Self {
        Self {
            handoffs: self.handoffs.saturating_add(1),
            ..self
        }
    }

    /// Seconds the job has been waiting at `now` (0 if it never waited).
    pub fn waited(&self, now: i64) -> i64 {
        self.waiting_since
            .map_or(0, |t| now.saturating_sub(t).max(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_wire_form_is_stable() {
        let log: LogId = "2f1c7a52-8c52-4a44-9a0e-3f0c1f6f2b11"
            .parse()
            .unwrap_or_else(|_| LogId::new_random());
        let job = SnapshotJob::new(log, 3, 0);
        assert_eq!(
            job.to_json(),
            r#"{"logId":"2f1c7a52-8c52-4a44-9a0e-3f0c1f6f2b11","segment":3,"entry":0}"#
        );
        let deferred = job.deferred(100).deferred(160).handed_off();
        assert_eq!(
            deferred.to_json(),
            r#"{"logId":"2f1c7a52-8c52-4a44-9a0e-3f0c1f6f2b11","segment":3,"entry":0,"deferrals":2,"handoffs":1,"waitingSince":100}"#
        );
        let back = SnapshotJob::from_json(&deferred.to_json()).ok();
        assert_eq!(back, Some(deferred));
        assert_eq!(back.map(|j| j.deferrals), Some(2));
        assert_eq!(deferred.waited(190), 90, "measured from the first wait");
    }

    #[test]
    fn malformed_jobs_are_rejected() {
        assert!(SnapshotJob::from_json(r#"{"logId":"nope","segment":1,"entry":2}"#).is_err());
        assert!(SnapshotJob::from_json(r#"{"segment":1,"entry":2}"#).is_err());
        assert!(
            SnapshotJob::from_json(
                r#"{"logId":"2f1c7a52-8c52-4a44-9a0e-3f0c1f6f2b11","segment":-1,"entry":2}"#
            )
            .is_err()
        );
    }
}

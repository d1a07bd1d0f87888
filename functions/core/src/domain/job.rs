//! The snapshot job message: what the stream router puts on the snapshot queue for each inserted
//! Snapshot entry, and what the snapshot worker (and the reprocess tool) read back.

use serde::{Deserialize, Serialize};

use super::LogId;

/// Build (or finish building) the snapshot of the Snapshot entry `entry` of segment `segment`.
///
/// Wire form: `{"logId":"<uuid>","segment":3,"entry":0}`, plus `"deferrals":n` once the worker
/// has deferred the job `n` times (it sets the backoff). Duplicates are expected: the router may
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
        }
    }

    pub fn to_json(&self) -> String {
        // A struct of a UUID and integers always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn from_json(body: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(body)
    }

    /// The same job, counted as deferred once more.
    pub fn deferred(self) -> Self {
        Self {
            deferrals: self.deferrals.saturating_add(1),
            ..self
        }
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
        let deferred = job.deferred().deferred();
        let back = SnapshotJob::from_json(&deferred.to_json()).ok();
        assert_eq!(back, Some(deferred));
        assert_eq!(back.map(|j| j.deferrals), Some(2));
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

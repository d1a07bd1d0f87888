//! Queued pushes (`docs/sync.md`, "Queued pushes"): the message the API enqueues for a Replicache
//! push on the sync FIFO queue, and how the sync writer turns a batch of them into the per-client
//! pushes of one group commit ([`EventLog::push_batch`](crate::log::EventLog::push_batch)).
//!
//! A message is `{"v":1,"log","group","mutations":[{clientID,id,name,args}],"received","subject"}`;
//! a push too large for one SQS message is written to the bucket under `pushes/` (tagged for
//! auto-delete) and the message is `{"v":1,"log","s3":"pushes/<log>/<uuid>.json"}`. The message
//! group is the log id, so one writer at a time applies a sheet's pushes, in order; the
//! deduplication id is a hash of the push's content.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::domain::LogId;

/// The message format version.
pub const MESSAGE_VERSION: u32 = 1;
/// SQS's largest message body; a larger push goes through the bucket.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;
/// Prefix of pushes stored in the bucket.
pub const PUSHES_PREFIX: &str = "pushes/";

/// The most mutations one Replicache push may carry (`docs/sync.md`, "Push limits"). The 6 MiB
/// body alone let one push hold a sheet's writer for many seconds; at this limit the writer
/// applies a push in ten entries of 1,000. A client with a longer queue splits it into several
/// pushes, in order (the web page's pusher does).
pub const MAX_PUSH_MUTATIONS: usize = 10_000;

/// The most distinct clients one push may carry mutations for: each new one costs the API (and
/// the writer) one strong Clients query, issued together. A client group is one person's tabs.
pub const MAX_PUSH_CLIENTS: usize = 100;

/// A push over one of the push limits: what was counted, how many, and the limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the push carries {count} {what}; the limit is {limit} per push: split it into several pushes, in order"
)]
pub struct PushTooLarge {
    pub what: &'static str,
    pub count: usize,
    pub limit: usize,
}

/// Checks a push's mutations (their client ids, in order) against [`MAX_PUSH_MUTATIONS`] and
/// [`MAX_PUSH_CLIENTS`], in time linear in the push.
pub fn check_push_limits<'a>(
    clients: impl ExactSizeIterator<Item = &'a str>,
) -> Result<(), PushTooLarge> {
    let count = clients.len();
    if count > MAX_PUSH_MUTATIONS {
        return Err(PushTooLarge {
            what: "mutations",
            count,
            limit: MAX_PUSH_MUTATIONS,
        });
    }
    let mut distinct = std::collections::HashSet::new();
    for c in clients {
        distinct.insert(c);
    }
    if distinct.len() > MAX_PUSH_CLIENTS {
        return Err(PushTooLarge {
            what: "distinct client ids",
            count: distinct.len(),
            limit: MAX_PUSH_CLIENTS,
        });
    }
    Ok(())
}

/// One mutation as the client pushed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedMutation {
    #[serde(rename = "clientID")]
    pub client_id: String,
    pub id: u64,
    pub name: String,
    #[serde(default)]
    pub args: Value,
}

/// A push as queued: the log, the client group and its mutations in the order sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueuedPush {
    pub v: u32,
    pub log: LogId,
    pub group: String,
    pub mutations: Vec<QueuedMutation>,
    /// When the API accepted the push (epoch milliseconds).
    pub received: i64,
    /// The caller's subject when the API checks access (for the writer's logs).
    #[serde(default)]
    pub subject: Option<String>,
}

/// A push stored in the bucket because it is larger than one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredPush {
    pub v: u32,
    pub log: LogId,
    pub s3: String,
}

/// A queue message: the push itself, or where it is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PushMessage {
    Stored(StoredPush),
    Inline(QueuedPush),
}

/// Why a message cannot be read. Never retried: the same bytes fail the same way.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    #[error("not a queued push: {0}")]
    Shape(String),
    #[error("queued push version {0} is not supported (this build reads {MESSAGE_VERSION})")]
    Version(u32),
    #[error("stored push key {0:?} is not under {PUSHES_PREFIX}")]
    Key(String),
}

impl PushMessage {
    pub fn parse(body: &str) -> Result<PushMessage, MessageError> {
        let m: PushMessage =
            serde_json::from_str(body).map_err(|e| MessageError::Shape(e.to_string()))?;
        let v = match &m {
            PushMessage::Stored(s) => {
                if !s.s3.starts_with(PUSHES_PREFIX) {
                    return Err(MessageError::Key(s.s3.clone()));
                }
                s.v
            }
            PushMessage::Inline(p) => p.v,
        };
        if v != MESSAGE_VERSION {
            return Err(MessageError::Version(v));
        }
        Ok(m)
    }

    pub fn log(&self) -> LogId {
        match self {
            PushMessage::Stored(s) => s.log,
            PushMessage::Inline(p) => p.log,
        }
    }
}

impl QueuedPush {
    pub fn parse(body: &[u8]) -> Result<QueuedPush, MessageError> {
        let p: QueuedPush =
            serde_json::from_slice(body).map_err(|e| MessageError::Shape(e.to_string()))?;
        if p.v != MESSAGE_VERSION {
            return Err(MessageError::Version(p.v));
        }
        Ok(p)
    }

    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and JSON values always serializes.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The key a push too large for one message is stored under.
    pub fn stored_key(&self) -> String {
        format!("{PUSHES_PREFIX}{}/{}.json", self.log, uuid::Uuid::new_v4())
    }

    /// The message deduplication id: a hash of the log, the client group and each client's run
    /// of mutation ids (with the mutations' names and args, so a client that reuses an id for
    /// different content is not silently dropped). A client re-pushing the same mutations
    /// within SQS's five-minute window is enqueued once.
    pub fn dedupe_id(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.log.as_bytes());
        h.update(self.group.as_bytes());
        h.update([0]);
        for m in &self.mutations {
            h.update(m.client_id.as_bytes());
            h.update([0]);
            h.update(m.id.to_be_bytes());
            h.update(m.name.as_bytes());
            h.update([0]);
            h.update(m.args.to_string().as_bytes());
            h.update([0]);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Each client's mutation ids, first to last, for logs.
    pub fn id_ranges(&self) -> BTreeMap<&str, (u64, u64)> {
        let mut out: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for m in &self.mutations {
            let r = out.entry(&m.client_id).or_insert((m.id, m.id));
            r.0 = r.0.min(m.id);
            r.1 = r.1.max(m.id);
        }
        out
    }
}

#[cfg(feature = "engine")]
pub use engine::client_pushes;
#[cfg(all(test, feature = "engine"))]
use engine::client_pushes_oracle;

#[cfg(feature = "engine")]
mod engine {
    use std::collections::{HashMap, HashSet};

    use super::QueuedPush;
    use crate::log::{ClientPush, PushedMutation};

    /// The pushes of one log's messages, in order, as one push per client: a client's mutations
    /// from every message, by id, the first copy of an id winning (Replicache re-pushes the same
    /// mutation under the same id). A client claimed by two groups keeps the first group; the
    /// other's mutations for it are returned apart, to be refused.
    ///
    /// Linear in the messages: clients are found through an index and each client's ids through
    /// a set, never by scanning what was gathered so far.
    pub fn client_pushes<'a>(
        pushes: impl IntoIterator<Item = &'a QueuedPush>,
    ) -> (Vec<ClientPush>, Vec<(String, String)>) {
        let mut out: Vec<ClientPush> = Vec::new();
        // Per client: its place in `out` and the ids it holds.
        let mut index: HashMap<&'a str, (usize, HashSet<u64>)> = HashMap::new();
        let mut mismatched = Vec::new();
        for p in pushes {
            for m in &p.mutations {
                let (pos, ids) = index.entry(m.client_id.as_str()).or_insert_with(|| {
                    out.push(ClientPush {
                        group: p.group.clone(),
                        client: m.client_id.clone(),
                        mutations: Vec::new(),
                    });
                    (out.len() - 1, HashSet::new())
                });
                let c = &mut out[*pos];
                if c.group != p.group {
                    mismatched.push((p.group.clone(), m.client_id.clone()));
                    continue;
                }
                if !ids.insert(m.id) {
                    continue;
                }
                c.mutations
                    .push(PushedMutation::from_args(m.id, &m.name, m.args.clone()));
            }
        }
        for c in &mut out {
            c.mutations.sort_by_key(|m| m.id);
        }
        mismatched.dedup();
        (out, mismatched)
    }

    /// The quadratic merge this replaced (a scan of the clients and of the client's ids per
    /// mutation), kept as the oracle of the tests.
    #[cfg(test)]
    pub(super) fn client_pushes_oracle<'a>(
        pushes: impl IntoIterator<Item = &'a QueuedPush>,
    ) -> (Vec<ClientPush>, Vec<(String, String)>) {
        let mut out: Vec<ClientPush> = Vec::new();
        let mut mismatched = Vec::new();
        for p in pushes {
            for m in &p.mutations {
                let pos = match out.iter().position(|c| c.client == m.client_id) {
                    Some(i) => i,
                    None => {
                        out.push(ClientPush {
                            group: p.group.clone(),
                            client: m.client_id.clone(),
                            mutations: Vec::new(),
                        });
                        out.len() - 1
                    }
                };
                let c = &mut out[pos];
                if c.group != p.group {
                    mismatched.push((p.group.clone(), m.client_id.clone()));
                    continue;
                }
                if c.mutations.iter().any(|x| x.id == m.id) {
                    continue;
                }
                c.mutations
                    .push(PushedMutation::from_args(m.id, &m.name, m.args.clone()));
            }
        }
        for c in &mut out {
            c.mutations.sort_by_key(|m| m.id);
        }
        mismatched.dedup();
        (out, mismatched)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn push(client: &str, ids: &[u64]) -> QueuedPush {
        QueuedPush {
            v: 1,
            log: LogId::from_uuid(uuid::Uuid::from_bytes([7; 16])),
            group: "g".into(),
            mutations: ids
                .iter()
                .map(|id| QueuedMutation {
                    client_id: client.into(),
                    id: *id,
                    name: "set".into(),
                    args: json!({"cells": [{"ref": "A1", "value": *id}]}),
                })
                .collect(),
            received: 1,
            subject: None,
        }
    }

    #[test]
    fn messages_round_trip_and_bad_ones_are_refused() {
        let p = push("c", &[1, 2]);
        match PushMessage::parse(&p.to_json()).unwrap() {
            PushMessage::Inline(back) => assert_eq!(back, p),
            other => panic!("{other:?}"),
        }
        let stored = serde_json::to_string(&StoredPush {
            v: 1,
            log: p.log,
            s3: p.stored_key(),
        })
        .unwrap();
        assert!(matches!(
            PushMessage::parse(&stored).unwrap(),
            PushMessage::Stored(_)
        ));
        let outside = stored.replace("pushes/", "payloads/");
        assert!(matches!(
            PushMessage::parse(&outside),
            Err(MessageError::Key(_))
        ));
        assert!(PushMessage::parse("{}").is_err());
        assert!(matches!(
            PushMessage::parse(&p.to_json().replace("\"v\":1", "\"v\":9")),
            Err(MessageError::Version(9))
        ));
    }

    #[test]
    fn the_dedupe_id_follows_the_content() {
        let a = push("c", &[1, 2]);
        assert_eq!(a.dedupe_id(), push("c", &[1, 2]).dedupe_id());
        assert!(a.dedupe_id().len() <= 128);
        assert_ne!(a.dedupe_id(), push("c", &[1, 2, 3]).dedupe_id());
        assert_ne!(a.dedupe_id(), push("d", &[1, 2]).dedupe_id());
        let mut other_args = a.clone();
        other_args.mutations[0].args = json!({"cells": []});
        assert_ne!(a.dedupe_id(), other_args.dedupe_id());
        // When it was received does not matter: a re-push is the same push.
        let mut later = a.clone();
        later.received = 99;
        assert_eq!(a.dedupe_id(), later.dedupe_id());
    }

    #[cfg(feature = "engine")]
    #[test]
    fn pushes_merge_per_client_by_id() {
        let mut second = push("c", &[2, 3]);
        second.mutations.extend(push("d", &[1]).mutations);
        let (clients, mismatched) = client_pushes([&push("c", &[1, 2]), &second]);
        assert!(mismatched.is_empty());
        assert_eq!(clients.len(), 2);
        assert_eq!(
            clients[0]
                .mutations
                .iter()
                .map(|m| m.id)
                .collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(clients[1].client, "d");
        let mut other_group = push("c", &[4]);
        other_group.group = "h".into();
        let (clients, mismatched) = client_pushes([&push("c", &[1]), &other_group]);
        assert_eq!(clients[0].mutations.len(), 1);
        assert_eq!(mismatched, vec![("h".to_owned(), "c".to_owned())]);
    }

    #[test]
    fn pushes_over_the_limits_are_refused() {
        let ids = |n: usize, clients: usize| -> Vec<String> {
            (0..n).map(|i| format!("c{}", i % clients)).collect()
        };
        let ok = ids(MAX_PUSH_MUTATIONS, MAX_PUSH_CLIENTS);
        assert_eq!(check_push_limits(ok.iter().map(String::as_str)), Ok(()));
        let many = ids(MAX_PUSH_MUTATIONS + 1, 1);
        let err = check_push_limits(many.iter().map(String::as_str)).unwrap_err();
        assert_eq!((err.what, err.count), ("mutations", MAX_PUSH_MUTATIONS + 1));
        let clients = ids(MAX_PUSH_CLIENTS + 1, MAX_PUSH_CLIENTS + 1);
        let err = check_push_limits(clients.iter().map(String::as_str)).unwrap_err();
        assert_eq!(
            (err.what, err.count, err.limit),
            (
                "distinct client ids",
                MAX_PUSH_CLIENTS + 1,
                MAX_PUSH_CLIENTS
            )
        );
    }

    #[cfg(feature = "engine")]
    mod merge_oracle {
        use super::*;
        use proptest::prelude::*;

        /// Messages of a few clients in two groups, with repeated and out-of-order ids.
        fn messages() -> impl Strategy<Value = Vec<QueuedPush>> {
            let mutation = (0u8..5, 1u64..12, 0u8..3);
            let message = (0u8..2, proptest::collection::vec(mutation, 0..20));
            proptest::collection::vec(message, 1..6).prop_map(|ms| {
                ms.into_iter()
                    .map(|(group, mutations)| {
                        let mut p = push("x", &[]);
                        p.group = format!("g{group}");
                        p.mutations = mutations
                            .into_iter()
                            .map(|(client, id, v)| QueuedMutation {
                                client_id: format!("c{client}"),
                                id,
                                name: "set".into(),
                                args: json!({"cells": [{"ref": "A1", "value": v}]}),
                            })
                            .collect();
                        p
                    })
                    .collect()
            })
        }

        proptest! {
            #[test]
            fn the_indexed_merge_gives_what_the_scanning_one_gave(ms in messages()) {
                prop_assert_eq!(client_pushes(&ms), client_pushes_oracle(&ms));
            }
        }
    }
}

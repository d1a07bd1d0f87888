//! Sync clients in the Clients table (`docs/sync.md`): which of a client's mutations have been
//! applied, and where.
//!
//! Every `mutations` entry covers one client's contiguous run of mutation ids `first..=last` and is
//! written in one transaction with a *range item* keyed (log ‖ client, `first`). The range item's
//! condition is "no item with this key exists". That one condition makes every mutation apply at
//! most once: a writer starts its run at `last + 1` of the newest range it read strongly, runs are
//! contiguous from id 1, so the run after any range starts exactly one id after it, and two
//! writers that read the same newest range both try to create the same key — one wins, the other
//! re-reads. The last applied mutation is the newest range item; where mutation `n` landed is the
//! newest range item whose `first <= n`.
//!
//! A client's first range is keyed 1 even when a replay starts it later (see [`ClientRange::key`]),
//! so the base case of that argument holds for replays too.
//!
//! A client's first run also adds the client to its group's item (log ‖ group, sort key 0), so a
//! pull with no cookie can list the group's clients.
//!
//! The sync writer's group commits (`docs/sync.md`, "Range items written later") write runs
//! without their range items (or a new client's group membership): the entry alone records them,
//! and the items follow when the log's *index mark* (log ‖ `w`, sort key 0) moves past them. Every run in
//! an entry at or before the mark has a range item; past it, the deferred entries are read too.
//! Those later items may record several runs of a client at once ([`ClientRange::runs`]).

use super::LogId;

/// Tag byte after the log id in a client's partition key.
pub const CLIENT_TAG: u8 = b'c';
/// Tag byte after the log id in a client group's partition key.
pub const GROUP_TAG: u8 = b'g';
/// The tag of a log's metadata item: `l`.
const META_TAG: u8 = b'l';
/// The tag of a log's index mark item: `w`.
pub const MARK_TAG: u8 = b'w';
/// The tag of a subject's delete counter, after 16 zero bytes: `r`.
const RATE_TAG: u8 = b'r';

/// One run of a client's mutations: the range item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRange {
    pub group: String,
    pub client: String,
    /// The range item's sort key: `first`, except for a client's first range, whose key is
    /// always 1. A replay may start a client past id 1 (its earlier mutations are in the state the
    /// target log was forked from); keying every first range at 1 keeps two replays that start
    /// the same client at different ids from both succeeding.
    pub key: u64,
    pub first: u64,
    pub last: u64,
    /// Sequence of the `mutations` entry that records the run.
    pub seq: u64,
    /// Ids in the run whose arguments were invalid: processed, with no effect.
    pub rejected: Vec<u64>,
    /// For an item that records several consecutive runs (deferred runs indexed together): each
    /// run's first id and the sequence of its entry, in order, the first being `(first, ..)`
    /// and the last one's sequence `seq`. Empty for an item of one run.
    pub runs: Vec<(u64, u64)>,
}

impl ClientRange {
    pub fn contains(&self, id: u64) -> bool {
        (self.first..=self.last).contains(&id)
    }

    /// The sequence of the entry that records mutation `id`, if this range holds it.
    pub fn seq_of(&self, id: u64) -> Option<u64> {
        if !self.contains(id) {
            return None;
        }
        match self.runs.iter().rev().find(|(first, _)| *first <= id) {
            Some((_, seq)) => Some(*seq),
            None => Some(self.seq),
        }
    }

    /// The last mutation id this range applied in entries before sequence `before`, if any.
    pub fn last_before(&self, before: u64) -> Option<u64> {
        if self.runs.is_empty() {
            return (self.seq < before).then_some(self.last);
        }
        let mut last = None;
        for (i, (_, seq)) in self.runs.iter().enumerate() {
            if *seq < before {
                last = Some(match self.runs.get(i + 1) {
                    Some((next, _)) => next - 1,
                    None => self.last,
                });
            }
        }
        last
    }
}

/// Partition key of a client's range items.
pub fn client_key(log: LogId, client: &str) -> Vec<u8> {
    tagged(log, CLIENT_TAG, client)
}

/// Partition key of a client group's item.
pub fn group_key(log: LogId, group: &str) -> Vec<u8> {
    tagged(log, GROUP_TAG, group)
}

/// Partition key of a log's metadata item (its creator and its deletion tombstone; sort key 0).
pub fn meta_key(log: LogId) -> Vec<u8> {
    tagged(log, META_TAG, "")
}

/// Partition key of a log's index mark (sort key 0): every client run in an entry at or before
/// the mark's sequence has its range item.
pub fn mark_key(log: LogId) -> Vec<u8> {
    tagged(log, MARK_TAG, "")
}

/// Partition key of a subject's delete counter (sort key 0): 16 zero bytes, which no log id
/// is (a log id is a version-4 UUID), then `r` and the subject.
pub fn delete_rate_key(subject: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(17 + subject.len());
    k.extend_from_slice(&[0; 16]);
    k.push(RATE_TAG);
    k.extend_from_slice(subject.as_bytes());
    k
}

fn tagged(log: LogId, tag: u8, id: &str) -> Vec<u8> {
    tagged_key(log, tag, id)
}

/// A Clients-table partition key: the log's 16 bytes, a tag byte naming the kind of item, then
/// the item's own id (empty for a log's one item of that kind).
pub(crate) fn tagged_key(log: LogId, tag: u8, id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(17 + id.len());
    k.extend_from_slice(log.as_bytes());
    k.push(tag);
    k.extend_from_slice(id.as_bytes());
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_and_group_keys_never_collide() {
        let log = LogId::new_random();
        assert_ne!(client_key(log, "x"), group_key(log, "x"));
        assert_eq!(client_key(log, "ab").len(), 19);
        assert_eq!(&client_key(log, "ab")[..16], log.as_bytes());
        assert_ne!(mark_key(log), meta_key(log));
    }

    fn merged() -> ClientRange {
        ClientRange {
            group: "g".into(),
            client: "c".into(),
            key: 4,
            first: 4,
            last: 9,
            seq: 30,
            rejected: vec![],
            runs: vec![(4, 10), (6, 20), (8, 30)],
        }
    }

    #[test]
    fn a_range_of_several_runs_says_where_each_mutation_landed() {
        let r = merged();
        assert_eq!(r.seq_of(3), None);
        assert_eq!(r.seq_of(4), Some(10));
        assert_eq!(r.seq_of(5), Some(10));
        assert_eq!(r.seq_of(6), Some(20));
        assert_eq!(r.seq_of(9), Some(30));
        assert_eq!(r.seq_of(10), None);
        assert_eq!(r.last_before(10), None);
        assert_eq!(r.last_before(11), Some(5));
        assert_eq!(r.last_before(21), Some(7));
        assert_eq!(r.last_before(31), Some(9));
        let one = ClientRange {
            runs: vec![],
            ..merged()
        };
        assert_eq!(one.seq_of(5), Some(30));
        assert_eq!(one.last_before(30), None);
        assert_eq!(one.last_before(31), Some(9));
    }
}

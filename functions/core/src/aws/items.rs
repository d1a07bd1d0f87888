//! Mapping between Entry/Segment items and records, and DynamoDB's item-size rules.
//!
//! Attribute names are single letters (see `docs/storage.md`): each name byte is stored and paid
//! for on every item, and the Entry table has one item per edit.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use bytes::Bytes;

use crate::domain::clients::{ClientRange, client_key, group_key};
use crate::domain::{EntryRecord, EntryType, LogId, SegmentRecord, parse_segment_id, segment_id};
use crate::error::StoreError;

pub type Item = HashMap<String, AttributeValue>;

/// Entry table attribute names.
pub mod entry_attr {
    pub const SEGMENT_ID: &str = "s";
    pub const NUM: &str = "n";
    pub const CREATED: &str = "c";
    pub const TYPE: &str = "t";
    pub const VERSION: &str = "v";
    pub const BODY: &str = "b";
    pub const EXTERNAL: &str = "e";
    pub const ROOT: &str = "r";
    /// The append call's identity: 8 bytes, big-endian.
    pub const ATTEMPT: &str = "w";
    /// Entries appended with an idempotency key: where the key sits in the Dedupe table
    /// (`crate::domain::dedupe::DedupeRef`), so deleting the log can remove it.
    pub const DEDUPE: &str = "k";
}

/// Segment table attribute names.
pub mod segment_attr {
    pub const LOG_ID: &str = "l";
    pub const NUM: &str = "n";
    pub const CREATED: &str = "c";
    pub const BASE_SEQ: &str = "q";
    pub const LAST_SNAPSHOT: &str = "s";
    pub const ARCHIVE: &str = "a";
}

/// The Dedupe table: partition key `p` (the hash prefix) and one binary set per month
/// (`crate::domain::dedupe`).
pub mod dedupe_attr {
    pub const PREFIX: &str = "p";
}

/// A Dedupe item as month column name → set elements (the form the in-memory store keeps).
pub fn dedupe_item(
    prefix: &[u8],
    columns: &std::collections::BTreeMap<String, std::collections::BTreeSet<Vec<u8>>>,
) -> Item {
    let mut item = Item::new();
    item.insert(dedupe_attr::PREFIX.into(), bin(prefix));
    for (name, set) in columns {
        item.insert(
            name.clone(),
            AttributeValue::Bs(set.iter().map(|e| Blob::new(e.clone())).collect()),
        );
    }
    item
}

/// Finds a key's recorded value in the given month columns of a Dedupe item.
pub fn dedupe_hit(
    item: &Item,
    suffix: &[u8; crate::domain::dedupe::SUFFIX_BYTES],
    columns: &[String],
) -> Option<crate::domain::dedupe::DedupeHit> {
    let elements = columns
        .iter()
        .filter_map(|c| match item.get(c) {
            Some(AttributeValue::Bs(set)) => Some(set.iter().map(|b| b.as_ref())),
            _ => None,
        })
        .flatten();
    crate::domain::dedupe::find_value(elements, suffix)
}

/// The Clients table (`crate::domain::clients`): partition key `k` (log ‖ tag ‖ client or group
/// id), sort key `m` (a range's first mutation id; 0 for a group item).
pub mod client_attr {
    pub const KEY: &str = "k";
    pub const FIRST: &str = "m";
    pub const LAST: &str = "l";
    pub const SEQ: &str = "q";
    pub const GROUP: &str = "g";
    pub const REJECTED: &str = "x";
    /// A range's first id, when it differs from the sort key (a replayed client's first range).
    pub const START: &str = "f";
    /// A range item of several runs: each run's first id and entry sequence, `first:seq`
    /// separated by commas.
    pub const RUNS: &str = "r";
    /// The index mark's sequence (the mark item's only attribute besides the key).
    pub const MARK: &str = "w";
    /// A group item's client ids (string set).
    pub const CLIENTS: &str = "c";
    /// A group item's owner: the subject that first pushed or pulled the group.
    pub const OWNER: &str = "o";
    /// The log (its 16 bytes), on the items a delete finds through [`CLIENTS_BY_LOG`]: each
    /// client's first range item (sort key 1), each group item and the index mark. Sparse: the
    /// other range items and the metadata item have none, so only one index write per client.
    pub const LOG: &str = "i";
}

/// The Clients table's global secondary index by log (partition key [`client_attr::LOG`], keys
/// only): how a delete finds a log's clients without reading anyone else's.
pub const CLIENTS_BY_LOG: &str = "byLog";

pub fn client_range_to_item(log: LogId, r: &ClientRange) -> Item {
    let mut item = Item::new();
    item.insert(client_attr::KEY.into(), bin(client_key(log, &r.client)));
    item.insert(client_attr::FIRST.into(), num(r.key));
    if r.key == 1 {
        // A client's first range (always keyed 1): what a delete finds the client by.
        item.insert(client_attr::LOG.into(), bin(log.as_bytes().to_vec()));
    }
    if r.first != r.key {
        item.insert(client_attr::START.into(), num(r.first));
    }
    item.insert(client_attr::LAST.into(), num(r.last));
    item.insert(client_attr::SEQ.into(), num(r.seq));
    item.insert(
        client_attr::GROUP.into(),
        AttributeValue::S(r.group.clone()),
    );
    if !r.rejected.is_empty() {
        item.insert(
            client_attr::REJECTED.into(),
            AttributeValue::Ns(r.rejected.iter().map(u64::to_string).collect()),
        );
    }
    if !r.runs.is_empty() {
        let runs: Vec<String> = r.runs.iter().map(|(f, q)| format!("{f}:{q}")).collect();
        item.insert(client_attr::RUNS.into(), AttributeValue::S(runs.join(",")));
    }
    item
}

/// The runs of a range item of several runs (empty when the item has one).
fn runs_from_item(item: &Item) -> Result<Vec<(u64, u64)>, StoreError> {
    const WHAT: &str = "Clients item";
    let Some(text) = opt_str(item, client_attr::RUNS, WHAT)? else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(|pair| {
            pair.split_once(':')
                .and_then(|(f, q)| Some((f.parse().ok()?, q.parse().ok()?)))
                .ok_or_else(|| StoreError::corrupt(WHAT, format!("run {pair:?} is not first:seq")))
        })
        .collect()
}

pub fn client_range_from_item(item: &Item) -> Result<ClientRange, StoreError> {
    const WHAT: &str = "Clients item";
    let key = get_bin(item, client_attr::KEY, WHAT)?;
    let client = key
        .get(17..)
        .and_then(|b| std::str::from_utf8(b).ok())
        .ok_or_else(|| StoreError::corrupt(WHAT, "the key holds no client id"))?
        .to_owned();
    let mut rejected = match item.get(client_attr::REJECTED) {
        None => Vec::new(),
        Some(AttributeValue::Ns(ns)) => ns
            .iter()
            .map(|n| n.parse::<u64>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| StoreError::corrupt(WHAT, "a rejected id is out of range"))?,
        Some(_) => {
            return Err(StoreError::corrupt(
                WHAT,
                "rejected ids are not a number set",
            ));
        }
    };
    rejected.sort_unstable();
    let key: u64 = get_num(item, client_attr::FIRST, WHAT)?;
    Ok(ClientRange {
        key,
        first: opt_num(item, client_attr::START, WHAT)?.unwrap_or(key),
        group: opt_str(item, client_attr::GROUP, WHAT)?
            .ok_or_else(|| StoreError::corrupt(WHAT, "attribute g is missing"))?,
        client,
        last: get_num(item, client_attr::LAST, WHAT)?,
        seq: get_num(item, client_attr::SEQ, WHAT)?,
        rejected,
        runs: runs_from_item(item)?,
    })
}

/// A client group's item with the given clients.
pub fn group_item(log: LogId, group: &str, clients: &[String]) -> Item {
    let mut item = Item::new();
    item.insert(client_attr::KEY.into(), bin(group_key(log, group)));
    item.insert(client_attr::FIRST.into(), num(0));
    item.insert(client_attr::LOG.into(), bin(log.as_bytes().to_vec()));
    if !clients.is_empty() {
        item.insert(
            client_attr::CLIENTS.into(),
            AttributeValue::Ss(clients.to_vec()),
        );
    }
    item
}

pub fn num(n: impl ToString) -> AttributeValue {
    AttributeValue::N(n.to_string())
}

pub fn bin(b: impl Into<Vec<u8>>) -> AttributeValue {
    AttributeValue::B(Blob::new(b))
}

pub fn entry_key(log: LogId, segment: u64, n: u64) -> Item {
    HashMap::from([
        (
            entry_attr::SEGMENT_ID.to_owned(),
            bin(segment_id(log, segment)),
        ),
        (entry_attr::NUM.to_owned(), num(n)),
    ])
}

pub fn segment_key(log: LogId, n: u64) -> Item {
    HashMap::from([
        (
            segment_attr::LOG_ID.to_owned(),
            bin(log.as_bytes().to_vec()),
        ),
        (segment_attr::NUM.to_owned(), num(n)),
    ])
}

pub fn entry_to_item(log: LogId, e: &EntryRecord) -> Item {
    use entry_attr::*;
    let mut item = entry_key(log, e.segment, e.num);
    item.insert(CREATED.into(), num(e.created));
    item.insert(TYPE.into(), num(e.kind.0));
    if e.version != 0 {
        item.insert(VERSION.into(), num(e.version));
    }
    if let Some(body) = &e.body {
        // An empty body is omitted unless an attached payload needs it to tell the two uses of
        // `e` apart (see `EntryRecord`).
        if !body.is_empty() || e.external.is_some() {
            item.insert(BODY.into(), bin(body.to_vec()));
        }
    }
    if let Some(key) = &e.external {
        item.insert(EXTERNAL.into(), AttributeValue::S(key.clone()));
    }
    if let Some(root) = &e.snapshot_root {
        item.insert(ROOT.into(), AttributeValue::S(root.clone()));
    }
    if let Some(attempt) = e.attempt {
        item.insert(ATTEMPT.into(), bin(attempt.to_be_bytes().to_vec()));
    }
    item
}

pub fn entry_from_item(item: &Item) -> Result<EntryRecord, StoreError> {
    use entry_attr::*;
    const WHAT: &str = "Entry item";
    let sid = get_bin(item, SEGMENT_ID, WHAT)?;
    let (_, segment) = parse_segment_id(sid).ok_or_else(|| {
        StoreError::corrupt(WHAT, format!("bad segment id of {} bytes", sid.len()))
    })?;
    let external = opt_str(item, EXTERNAL, WHAT)?;
    let body = match item.get(BODY) {
        Some(AttributeValue::B(b)) => Some(Bytes::copy_from_slice(b.as_ref())),
        Some(_) => return Err(StoreError::corrupt(WHAT, "attribute b is not binary")),
        None if external.is_none() => Some(Bytes::new()),
        None => None,
    };
    Ok(EntryRecord {
        segment,
        num: get_num(item, NUM, WHAT)?,
        created: get_num(item, CREATED, WHAT)?,
        kind: EntryType(get_num(item, TYPE, WHAT)?),
        version: opt_num(item, VERSION, WHAT)?.unwrap_or(0),
        body,
        external,
        snapshot_root: opt_str(item, ROOT, WHAT)?,
        attempt: match item.get(ATTEMPT) {
            Some(AttributeValue::B(b)) => {
                Some(u64::from_be_bytes(b.as_ref().try_into().map_err(|_| {
                    StoreError::corrupt(WHAT, "attribute w is not 8 bytes")
                })?))
            }
            Some(_) => return Err(StoreError::corrupt(WHAT, "attribute w is not binary")),
            None => None,
        },
    })
}

pub fn segment_to_item(log: LogId, s: &SegmentRecord) -> Item {
    use segment_attr::*;
    let mut item = segment_key(log, s.num);
    item.insert(CREATED.into(), num(s.created));
    item.insert(BASE_SEQ.into(), num(s.base_seq));
    if let Some(last) = s.last_snapshot {
        item.insert(LAST_SNAPSHOT.into(), num(last));
    }
    if let Some(a) = &s.archive {
        item.insert(ARCHIVE.into(), AttributeValue::S(a.clone()));
    }
    item
}

pub fn segment_from_item(item: &Item) -> Result<SegmentRecord, StoreError> {
    use segment_attr::*;
    const WHAT: &str = "Segment item";
    Ok(SegmentRecord {
        num: get_num(item, NUM, WHAT)?,
        created: get_num(item, CREATED, WHAT)?,
        base_seq: get_num(item, BASE_SEQ, WHAT)?,
        last_snapshot: opt_num(item, LAST_SNAPSHOT, WHAT)?,
        archive: opt_str(item, ARCHIVE, WHAT)?,
    })
}

pub fn get_num<T: std::str::FromStr>(
    item: &Item,
    name: &str,
    what: &'static str,
) -> Result<T, StoreError> {
    opt_num(item, name, what)?
        .ok_or_else(|| StoreError::corrupt(what, format!("attribute {name} is missing")))
}

pub fn opt_num<T: std::str::FromStr>(
    item: &Item,
    name: &str,
    what: &'static str,
) -> Result<Option<T>, StoreError> {
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::N(n)) => n.parse().map(Some).map_err(|_| {
            StoreError::corrupt(what, format!("attribute {name}={n:?} is out of range"))
        }),
        Some(_) => Err(StoreError::corrupt(
            what,
            format!("attribute {name} is not a number"),
        )),
    }
}

pub fn get_bin<'a>(item: &'a Item, name: &str, what: &'static str) -> Result<&'a [u8], StoreError> {
    match item.get(name) {
        Some(AttributeValue::B(b)) => Ok(b.as_ref()),
        Some(_) => Err(StoreError::corrupt(
            what,
            format!("attribute {name} is not binary"),
        )),
        None => Err(StoreError::corrupt(
            what,
            format!("attribute {name} is missing"),
        )),
    }
}

pub fn opt_str(item: &Item, name: &str, what: &'static str) -> Result<Option<String>, StoreError> {
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::S(s)) => Ok(Some(s.clone())),
        Some(_) => Err(StoreError::corrupt(
            what,
            format!("attribute {name} is not a string"),
        )),
    }
}

pub fn opt_bool(item: &Item, name: &str, what: &'static str) -> Result<Option<bool>, StoreError> {
    match item.get(name) {
        None => Ok(None),
        Some(AttributeValue::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(StoreError::corrupt(
            what,
            format!("attribute {name} is not a boolean"),
        )),
    }
}

/// The size DynamoDB bills an item at, following AWS's published rules: each attribute costs its
/// name's UTF-8 length plus its value's size; strings are their UTF-8 length, binaries their raw
/// length, numbers about one byte per two significant digits plus one, booleans and nulls one
/// byte, lists and maps three bytes plus one per element plus their contents, sets the sum of
/// their elements.
pub fn item_size(item: &Item) -> u64 {
    item.iter()
        .map(|(name, value)| name.len() as u64 + value_size(value))
        .sum()
}

fn value_size(v: &AttributeValue) -> u64 {
    match v {
        AttributeValue::S(s) => s.len() as u64,
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len() as u64,
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(|s| s.len() as u64).sum(),
        AttributeValue::Ns(v) => v.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len() as u64).sum(),
        AttributeValue::L(v) => 3 + v.iter().map(|x| 1 + value_size(x)).sum::<u64>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, x)| 1 + k.len() as u64 + value_size(x))
                .sum::<u64>()
        }
        // Unknown future variants: count nothing rather than guess.
        _ => 0,
    }
}

fn number_size(n: &str) -> u64 {
    let mantissa = n.split(['e', 'E']).next().unwrap_or(n);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits
        .trim_start_matches('0')
        .trim_end_matches('0')
        .len()
        .max(1) as u64;
    let negative = u64::from(n.starts_with('-'));
    significant.div_ceil(2) + 1 + negative
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(body: &[u8]) -> EntryRecord {
        EntryRecord {
            segment: 3,
            num: 41,
            created: 1_763_700_000,
            kind: EntryType(16),
            version: 1,
            body: Some(Bytes::copy_from_slice(body)),
            external: None,
            snapshot_root: None,
            attempt: None,
        }
    }

    #[test]
    fn the_append_identity_costs_nine_bytes_per_item() {
        let log = LogId::new_random();
        let without = item_size(&entry_to_item(log, &sample(&[0u8; 12])));
        let with = item_size(&entry_to_item(
            log,
            &EntryRecord {
                attempt: Some(u64::MAX),
                ..sample(&[0u8; 12])
            },
        ));
        // Name `w` (1 byte) + 8 bytes of binary: a one-cell `set` entry goes from 48 to 57
        // bytes, well under 100 and under one write unit.
        assert_eq!(with - without, 9);
    }

    #[test]
    fn entry_round_trips_through_an_item() {
        let log = LogId::new_random();
        for rec in [
            sample(b"abc"),
            EntryRecord {
                body: None,
                external: Some("payloads/x".into()),
                ..sample(b"")
            },
            EntryRecord {
                external: Some("payloads/y".into()),
                ..sample(b"")
            },
            EntryRecord {
                snapshot_root: Some("r".into()),
                attempt: Some(7),
                kind: EntryType::SNAPSHOT,
                ..sample(b"")
            },
        ] {
            let item = entry_to_item(log, &rec);
            assert_eq!(entry_from_item(&item).ok(), Some(rec));
        }
    }

    #[test]
    fn number_sizes_follow_significant_digits() {
        assert_eq!(number_size("0"), 2);
        assert_eq!(number_size("7"), 2);
        assert_eq!(number_size("1000"), 2);
        assert_eq!(number_size("1763700000"), 4); // "17637": 5 significant digits
        assert_eq!(number_size("123456"), 4);
        assert_eq!(number_size("-12"), 3);
    }

    #[test]
    fn single_cell_entry_item_is_under_100_bytes() {
        let item = entry_to_item(LogId::new_random(), &sample(&[7u8; 30]));
        let size = item_size(&item);
        // s: 1+17, n: 1+2, c: 1+4, t: 1+2, v: 1+2, b: 1+30
        assert_eq!(size, 63);
    }

    #[test]
    fn corrupt_items_are_typed_errors() {
        let log = LogId::new_random();
        let mut item = entry_to_item(log, &sample(b"x"));
        item.insert("t".into(), AttributeValue::S("oops".into()));
        assert!(matches!(
            entry_from_item(&item),
            Err(StoreError::Corrupt { .. })
        ));
        let mut item = entry_to_item(log, &sample(b"x"));
        item.insert("n".into(), num("-5"));
        assert!(matches!(
            entry_from_item(&item),
            Err(StoreError::Corrupt { .. })
        ));
        let mut item = entry_to_item(log, &sample(b"x"));
        item.insert("s".into(), bin(vec![1, 2, 3]));
        assert!(matches!(
            entry_from_item(&item),
            Err(StoreError::Corrupt { .. })
        ));
    }
}

//! Archived segments (`docs/storage.md`, "Archived segments"): every entry item of an ended
//! segment, in order, as one zstd-compressed JSON-lines object in S3, named by the SHA-256 of its
//! bytes. The Segment item's Archive attribute (`a`) names the object once it is written; then
//! the entry items are deleted. Readers that find a segment's items gone (all, or a prefix: they
//! are deleted in order) read the object instead and see the same records.
//!
//! The first line is a header (`{"format":1,"log":…,"segment":…,"entries":…}`), then one line per
//! entry with the item's attributes under their short names; bodies are base64. An operator can
//! read one with `zstd -dc <object> | head`.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::keys::payload_prefix;
use crate::domain::{EntryRecord, EntryType, LogId};

/// The Archive attribute of a segment whose entries were deleted without an archive (the
/// `delete` retention policy): its history is gone.
pub const DELETED: &str = "deleted";

const FORMAT: u32 = 1;
/// zstd level: archives are written once and read rarely; level 19 is slow to write but the
/// archiver runs in the background and the objects are small.
const LEVEL: i32 = 19;

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("archive {key}: {detail}")]
    Corrupt { key: String, detail: String },
    #[error("segment {segment} cannot be archived: {reason}")]
    NotArchivable { segment: u64, reason: String },
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    format: u32,
    log: String,
    segment: u64,
    entries: u64,
}

/// One entry item, under the item's own attribute names.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    n: u64,
    c: i64,
    t: u16,
    v: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    b: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    r: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    w: Option<u64>,
}

/// An encoded archive: its key and bytes.
#[derive(Debug, Clone)]
pub struct Encoded {
    pub key: String,
    pub bytes: Bytes,
}

/// Where a segment's archive with these bytes lives: under the log's payload prefix (readers
/// already may read it), named by segment and content hash.
pub fn archive_key(log: LogId, segment: u64, bytes: &[u8]) -> String {
    let hash = hex::encode(Sha256::digest(bytes));
    format!(
        "{}archive/{segment:020}-{}.jsonl.zst",
        payload_prefix(log),
        &hash[..32]
    )
}

/// Encodes an ended segment's entries. They must be the whole segment: numbered from 0 without
/// a gap and ending with its End Segment entry.
pub fn encode(log: LogId, segment: u64, entries: &[EntryRecord]) -> Result<Encoded, ArchiveError> {
    let refuse = |reason: String| ArchiveError::NotArchivable { segment, reason };
    if let Some((i, e)) = entries
        .iter()
        .enumerate()
        .find(|(i, e)| e.num != *i as u64 || e.segment != segment)
    {
        return Err(refuse(format!("entry {} is out of place at {i}", e.num)));
    }
    if !entries.last().is_some_and(EntryRecord::is_end_segment) {
        return Err(refuse("it has not ended".into()));
    }
    let header = Header {
        format: FORMAT,
        log: log.to_string(),
        segment,
        entries: entries.len() as u64,
    };
    let mut text = line(&header);
    for e in entries {
        text.push_str(&line(&Line {
            n: e.num,
            c: e.created,
            t: e.kind.0,
            v: e.version,
            b: e.body.as_ref().map(|b| STANDARD.encode(b)),
            e: e.external.clone(),
            r: e.snapshot_root.clone(),
            w: e.attempt,
        }));
    }
    let bytes = zstd::bulk::compress(text.as_bytes(), LEVEL)
        .map_err(|e| refuse(format!("compressing: {e}")))?;
    Ok(Encoded {
        key: archive_key(log, segment, &bytes),
        bytes: Bytes::from(bytes),
    })
}

fn line<T: Serialize>(v: &T) -> String {
    // Plain structs of numbers and strings always serialise.
    let mut s = serde_json::to_string(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Decodes and checks an archive read from `key`: the bytes must hash to the key, the header
/// must name this log and segment, and the entries must be the whole ended segment.
pub fn decode(
    key: &str,
    log: LogId,
    segment: u64,
    bytes: &[u8],
) -> Result<Vec<EntryRecord>, ArchiveError> {
    let corrupt = |detail: String| ArchiveError::Corrupt {
        key: key.to_owned(),
        detail,
    };
    if archive_key(log, segment, bytes) != key {
        return Err(corrupt(
            "its bytes do not match the hash in its name".into(),
        ));
    }
    // The header states the entry count; the decompressed size is bounded by the archive's own
    // size limit (a segment is at most a few GB of items, and the archiver wrote it).
    let text =
        zstd::stream::decode_all(bytes).map_err(|e| corrupt(format!("decompressing: {e}")))?;
    let text = std::str::from_utf8(&text).map_err(|e| corrupt(format!("not UTF-8: {e}")))?;
    let mut lines = text.lines();
    let header: Header = lines
        .next()
        .ok_or_else(|| corrupt("empty".into()))
        .and_then(|l| serde_json::from_str(l).map_err(|e| corrupt(format!("header: {e}"))))?;
    if header.format != FORMAT || header.log != log.to_string() || header.segment != segment {
        return Err(corrupt(format!(
            "header {header:?} is not format {FORMAT} of log {log} segment {segment}"
        )));
    }
    let mut out = Vec::with_capacity(usize::try_from(header.entries).unwrap_or(0).min(1 << 20));
    for (i, l) in lines.enumerate() {
        let l: Line = serde_json::from_str(l).map_err(|e| corrupt(format!("entry {i}: {e}")))?;
        if l.n != i as u64 {
            return Err(corrupt(format!("entry {} is out of place at {i}", l.n)));
        }
        let body = match l.b {
            Some(b) => Some(Bytes::from(
                STANDARD
                    .decode(b)
                    .map_err(|e| corrupt(format!("entry {i} body: {e}")))?,
            )),
            None => None,
        };
        out.push(EntryRecord {
            segment,
            num: l.n,
            created: l.c,
            kind: EntryType(l.t),
            version: l.v,
            body,
            external: l.e,
            snapshot_root: l.r,
            attempt: l.w,
        });
    }
    if out.len() as u64 != header.entries || !out.last().is_some_and(EntryRecord::is_end_segment) {
        return Err(corrupt(format!(
            "{} entries, the header says {}, and the last must end the segment",
            out.len(),
            header.entries
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(segment: u64, num: u64, kind: EntryType, body: Option<&[u8]>) -> EntryRecord {
        EntryRecord {
            segment,
            num,
            created: 1_700_000_000 + num as i64,
            kind,
            version: 1,
            body: body.map(Bytes::copy_from_slice),
            external: None,
            snapshot_root: None,
            attempt: Some(num * 7),
        }
    }

    fn segment(n: u64) -> Vec<EntryRecord> {
        let mut v = vec![rec(3, 0, EntryType::SNAPSHOT, Some(b""))];
        for i in 1..n {
            v.push(rec(
                3,
                i,
                EntryType(14),
                Some(format!("cell {i}").as_bytes()),
            ));
        }
        v[0].snapshot_root = Some("snapshots/x/manifests/1.json".into());
        v[1].body = None;
        v[1].external = Some("payloads/x/abc".into());
        v.push(rec(3, n, EntryType::END_SEGMENT, None));
        v
    }

    #[test]
    fn a_segment_round_trips_through_its_archive() {
        let log = LogId::new_random();
        let entries = segment(500);
        let a = encode(log, 3, &entries).unwrap();
        assert!(
            a.key
                .starts_with(&format!("payloads/{log}/archive/00000000000000000003-"))
        );
        assert_eq!(decode(&a.key, log, 3, &a.bytes).unwrap(), entries);
        // Content-addressed: the same segment gives the same object.
        assert_eq!(encode(log, 3, &entries).unwrap().key, a.key);
    }

    #[test]
    fn archives_are_checked_on_read() {
        let log = LogId::new_random();
        let a = encode(log, 3, &segment(10)).unwrap();
        let mut bad = a.bytes.to_vec();
        bad[5] ^= 1;
        assert!(
            decode(&a.key, log, 3, &bad).is_err(),
            "bytes that do not hash to the key"
        );
        assert!(
            decode(&a.key, LogId::new_random(), 3, &a.bytes).is_err(),
            "another log"
        );
        assert!(decode(&a.key, log, 4, &a.bytes).is_err(), "another segment");
    }

    #[test]
    fn only_a_whole_ended_segment_is_archived() {
        let log = LogId::new_random();
        let mut open = segment(10);
        open.pop();
        assert!(encode(log, 3, &open).is_err(), "not ended");
        let mut gap = segment(10);
        gap.remove(4);
        assert!(encode(log, 3, &gap).is_err(), "a gap");
        assert!(
            encode(log, 4, &segment(10)).is_err(),
            "another segment's entries"
        );
    }
}

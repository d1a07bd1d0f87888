//! Idempotency keys in the Dedupe table (`docs/storage.md`, "Dedupe table").
//!
//! A key is hashed with its log into 128 bits. The first `n` bits (the *prefix*) pick the item;
//! the last 64 bits (the *suffix*) are what the item stores. Each item has one binary-set column
//! per calendar month (UTC), named `m<months since 1970-01>`. Recording a key is one conditional
//! update: "the suffix is in none of the checked columns", then add it to this month's column and
//! remove the columns that have aged out. Old keys therefore disappear on the next write to their
//! item, with no TTL scan and no cleanup job.
//!
//! The window: a key is checked against this month's column and the previous month's, and during
//! the first [`GRACE_DAYS`] days of a month also against the month before last, so a key is
//! remembered for at least 30 days (a key written in the last second of January is still known
//! on 2 March) and forgotten after at most about 64.
//!
//! A duplicate must answer the seq its first request got, so each key adds two elements to the
//! set: the bare suffix, which the condition tests with `contains`, and the suffix followed by a
//! 4-byte fingerprint of the request and the seq. The second is found again in the item that the
//! failed condition returns, so a duplicate costs no extra read.

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::LogId;

/// Bytes of the stored suffix of a key's hash.
pub const SUFFIX_BYTES: usize = 8;
/// Bytes of the request fingerprint stored with each key.
pub const FINGERPRINT_BYTES: usize = 4;
/// Days at the start of a month during which the month before last is still checked.
pub const GRACE_DAYS: u8 = 2;
/// Columns older than the checked ones that every write removes: an item untouched for up to a
/// year still sheds its old months on its next write.
const REMOVED_MONTHS: u32 = 12;
/// Target mean number of keys per item, which keeps the 99th percentile item under 1 KB
/// (`prefix_bits_for_rate`).
pub const TARGET_KEYS_PER_ITEM: f64 = 25.0;
/// Bytes one key adds to an item: the bare suffix and the suffix with fingerprint and seq (the
/// seq takes 1 to 8 bytes; 3 covers logs of up to 16 million entries).
pub const TYPICAL_BYTES_PER_KEY: usize = SUFFIX_BYTES * 2 + FINGERPRINT_BYTES + 3;

/// What an idempotency key names: a client-chosen key, or an upload being committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// The `Idempotency-Key` header.
    Request,
    /// An upload id: committing one upload twice appends one entry.
    Upload,
}

/// A key's place in the Dedupe table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupeKey {
    /// The partition key: the first `prefix_bits` bits of the hash, in `ceil(bits / 8)` bytes
    /// (trailing bits zero).
    pub prefix: Vec<u8>,
    pub suffix: [u8; SUFFIX_BYTES],
}

impl DedupeKey {
    pub fn new(prefix_bits: u8, log: LogId, kind: KeyKind, key: &str) -> Self {
        let mut h = Sha256::new();
        h.update(log.as_bytes());
        h.update([match kind {
            KeyKind::Request => b'r',
            KeyKind::Upload => b'u',
        }]);
        h.update(key.as_bytes());
        let digest = h.finalize();
        let bits = usize::from(prefix_bits.clamp(1, 64));
        let mut prefix = digest[..bits.div_ceil(8)].to_vec();
        let spare = prefix.len() * 8 - bits;
        if let Some(last) = prefix.last_mut() {
            *last &= 0xffu8 << spare;
        }
        let mut suffix = [0u8; SUFFIX_BYTES];
        suffix.copy_from_slice(&digest[16..16 + SUFFIX_BYTES]);
        Self { prefix, suffix }
    }
}

/// What a recorded key says about its first request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DedupeHit {
    pub seq: u64,
    pub fingerprint: [u8; FINGERPRINT_BYTES],
}

/// A fingerprint of what a request appends, to tell a retry from a different request that reuses
/// the key.
pub fn fingerprint(parts: &[&[u8]]) -> [u8; FINGERPRINT_BYTES] {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    let d = h.finalize();
    let mut fp = [0u8; FINGERPRINT_BYTES];
    fp.copy_from_slice(&d[..FINGERPRINT_BYTES]);
    fp
}

/// The set element that carries the seq: suffix, fingerprint, seq (big-endian, no leading zero
/// bytes, at least one byte). Longer than a bare suffix, so the two kinds never collide.
pub fn encode_value(suffix: &[u8; SUFFIX_BYTES], fp: [u8; FINGERPRINT_BYTES], seq: u64) -> Vec<u8> {
    let be = seq.to_be_bytes();
    let skip = be.iter().take_while(|b| **b == 0).count().min(7);
    let mut v = Vec::with_capacity(SUFFIX_BYTES + FINGERPRINT_BYTES + 8 - skip);
    v.extend_from_slice(suffix);
    v.extend_from_slice(&fp);
    v.extend_from_slice(&be[skip..]);
    v
}

/// Finds a key's value element among the elements of the checked columns.
pub fn find_value<'a>(
    elements: impl IntoIterator<Item = &'a [u8]>,
    suffix: &[u8; SUFFIX_BYTES],
) -> Option<DedupeHit> {
    elements.into_iter().find_map(|e| {
        let rest = e.strip_prefix(suffix.as_slice())?;
        if rest.len() <= FINGERPRINT_BYTES || rest.len() > FINGERPRINT_BYTES + 8 {
            return None;
        }
        let (fp, seq) = rest.split_at(FINGERPRINT_BYTES);
        let mut be = [0u8; 8];
        be[8 - seq.len()..].copy_from_slice(seq);
        let mut fingerprint = [0u8; FINGERPRINT_BYTES];
        fingerprint.copy_from_slice(fp);
        Some(DedupeHit {
            seq: u64::from_be_bytes(be),
            fingerprint,
        })
    })
}

/// Which month columns one write checks, adds to and removes, at a moment in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonthColumns {
    /// The month the key is added to (months since January 1970, UTC).
    pub month: u32,
    /// The column the key is added to (this month).
    pub current: String,
    /// Columns the key must be absent from: this month, the previous one, and during the grace
    /// days the month before last.
    pub checked: Vec<String>,
    /// Columns removed in the same write.
    pub removed: Vec<String>,
}

/// Months since January 1970 (UTC) of a Unix time.
pub fn month_index(unix_secs: i64) -> u32 {
    let t = OffsetDateTime::from_unix_timestamp(unix_secs).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let months = (i64::from(t.year()) - 1970) * 12 + i64::from(u8::from(t.month())) - 1;
    u32::try_from(months.max(0)).unwrap_or(0)
}

pub fn column_name(month: u32) -> String {
    format!("m{month}")
}

impl MonthColumns {
    pub fn at(unix_secs: i64) -> Self {
        let month = month_index(unix_secs);
        let day = OffsetDateTime::from_unix_timestamp(unix_secs)
            .map(|t| t.day())
            .unwrap_or(1);
        let checked_back = if day <= GRACE_DAYS { 2 } else { 1 };
        let checked = (0..=checked_back)
            .filter_map(|back| month.checked_sub(back))
            .map(column_name)
            .collect();
        let removed = (checked_back + 1..=checked_back + REMOVED_MONTHS)
            .filter_map(|back| month.checked_sub(back))
            .map(column_name)
            .collect();
        Self {
            month,
            current: column_name(month),
            checked,
            removed,
        }
    }
}

/// One key to record with an entry: where, what to test and what to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupeRecord {
    pub key: DedupeKey,
    pub fingerprint: [u8; FINGERPRINT_BYTES],
    pub columns: MonthColumns,
}

impl DedupeRecord {
    /// The two elements this key adds for an entry at `seq`.
    pub fn elements(&self, seq: u64) -> [Vec<u8>; 2] {
        [
            self.key.suffix.to_vec(),
            encode_value(&self.key.suffix, self.fingerprint, seq),
        ]
    }

    /// What the entry this key is recorded with keeps, so that deleting the log can find the
    /// key again. `None` past year 7431, when a month index no longer fits in two bytes.
    pub fn entry_ref(&self) -> Option<DedupeRef> {
        Some(DedupeRef {
            prefix: self.key.prefix.clone(),
            suffix: self.key.suffix,
            fingerprint: self.fingerprint,
            month: u16::try_from(self.columns.month).ok()?,
        })
    }
}

/// Where an entry's idempotency key sits in the Dedupe table: the item (its prefix), the month
/// column, and what the two elements are built from (with the entry's own seq). Stored on the
/// entry (attribute `k`, [`DedupeRef::encode`]) because a Dedupe item mixes the keys of many
/// logs and nothing else records which ones a log used; deleting the log reads it back and
/// removes the elements before the entry (`docs/storage.md`, "Deleting a log").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupeRef {
    pub prefix: Vec<u8>,
    pub suffix: [u8; SUFFIX_BYTES],
    pub fingerprint: [u8; FINGERPRINT_BYTES],
    /// Months since January 1970 (UTC): the column the key was added to.
    pub month: u16,
}

/// Bytes of an encoded [`DedupeRef`] before the prefix.
const REF_FIXED_BYTES: usize = SUFFIX_BYTES + FINGERPRINT_BYTES + 2;

impl DedupeRef {
    /// suffix (8 bytes) ‖ fingerprint (4) ‖ month (2, big-endian) ‖ prefix (1–8): 17 bytes at
    /// the default prefix of 17 bits.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(REF_FIXED_BYTES + self.prefix.len());
        v.extend_from_slice(&self.suffix);
        v.extend_from_slice(&self.fingerprint);
        v.extend_from_slice(&self.month.to_be_bytes());
        v.extend_from_slice(&self.prefix);
        v
    }

    /// The inverse of [`encode`](Self::encode); `None` for bytes that are not one.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() <= REF_FIXED_BYTES || bytes.len() > REF_FIXED_BYTES + 8 {
            return None;
        }
        let (suffix, rest) = bytes.split_at(SUFFIX_BYTES);
        let (fingerprint, rest) = rest.split_at(FINGERPRINT_BYTES);
        let (month, prefix) = rest.split_at(2);
        Some(Self {
            prefix: prefix.to_vec(),
            suffix: suffix.try_into().ok()?,
            fingerprint: fingerprint.try_into().ok()?,
            month: u16::from_be_bytes(month.try_into().ok()?),
        })
    }

    /// The month column holding the key.
    pub fn column(&self) -> String {
        column_name(u32::from(self.month))
    }

    /// The two elements the key added for the entry at `seq` (as [`DedupeRecord::elements`]).
    pub fn elements(&self, seq: u64) -> [Vec<u8>; 2] {
        [
            self.suffix.to_vec(),
            encode_value(&self.suffix, self.fingerprint, seq),
        ]
    }
}

/// The prefix length for an expected number of idempotent appends per month (across the whole
/// stack): an item holds a little over two months of keys, so the mean keys per item is
/// `2.07 × rate / 2^n`; `n` is the smallest value that keeps it at or under
/// [`TARGET_KEYS_PER_ITEM`]. At least 1 bit, at most 64.
pub fn prefix_bits_for_rate(keys_per_month: u64) -> u8 {
    let mut n = 1u8;
    while n < 64 && mean_keys_per_item(keys_per_month, n) > TARGET_KEYS_PER_ITEM {
        n += 1;
    }
    n
}

/// Mean keys per item at the fullest moment (two months and the grace days) for a key rate and
/// prefix length.
pub fn mean_keys_per_item(keys_per_month: u64, prefix_bits: u8) -> f64 {
    let window = keys_per_month as f64 * (2.0 + f64::from(GRACE_DAYS) / 30.0);
    window / 2f64.powi(i32::from(prefix_bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(y: i32, m: u8, d: u8) -> i64 {
        let date = time::Date::from_calendar_date(y, time::Month::try_from(m).unwrap(), d).unwrap();
        date.midnight().assume_utc().unix_timestamp()
    }

    #[test]
    fn month_columns_check_two_months_and_the_third_during_grace() {
        let jan31 = secs(2026, 1, 31) + 86_399;
        let c = MonthColumns::at(jan31);
        assert_eq!(c.current, column_name(month_index(jan31)));
        assert_eq!(c.checked.len(), 2);
        // 2 March still checks January; 3 March does not and removes it.
        let mar2 = MonthColumns::at(secs(2026, 3, 2) + 86_399);
        assert!(mar2.checked.contains(&c.current));
        let mar3 = MonthColumns::at(secs(2026, 3, 3));
        assert!(!mar3.checked.contains(&c.current));
        assert!(mar3.removed.contains(&c.current));
        assert_eq!(mar3.removed.len(), REMOVED_MONTHS as usize);
    }

    #[test]
    fn month_index_counts_from_1970() {
        assert_eq!(month_index(0), 0);
        assert_eq!(month_index(secs(2026, 11, 23)), 56 * 12 + 10);
    }

    #[test]
    fn values_round_trip_and_bare_suffixes_are_not_values() {
        let key = DedupeKey::new(20, LogId::new_random(), KeyKind::Request, "abc");
        for seq in [0, 1, 255, 256, 1 << 40, u64::MAX] {
            let v = encode_value(&key.suffix, [1, 2, 3, 4], seq);
            let bare = key.suffix.to_vec();
            let hit = find_value([bare.as_slice(), v.as_slice()], &key.suffix);
            assert_eq!(
                hit,
                Some(DedupeHit {
                    seq,
                    fingerprint: [1, 2, 3, 4]
                })
            );
        }
    }

    #[test]
    fn prefixes_are_masked_and_keys_are_per_log_and_kind() {
        let log = LogId::new_random();
        let a = DedupeKey::new(12, log, KeyKind::Request, "k");
        assert_eq!(a.prefix.len(), 2);
        assert_eq!(a.prefix[1] & 0x0f, 0);
        assert_ne!(
            a,
            DedupeKey::new(12, LogId::new_random(), KeyKind::Request, "k")
        );
        assert_ne!(a, DedupeKey::new(12, log, KeyKind::Upload, "k"));
        assert_eq!(a, DedupeKey::new(12, log, KeyKind::Request, "k"));
    }

    #[test]
    fn an_entrys_ref_round_trips_and_names_the_same_elements() {
        let log = LogId::new_random();
        for bits in [1, 17, 64] {
            let rec = DedupeRecord {
                key: DedupeKey::new(bits, log, KeyKind::Upload, "u1"),
                fingerprint: [9, 8, 7, 6],
                columns: MonthColumns::at(secs(2026, 11, 25)),
            };
            let r = rec.entry_ref().expect("a month of 2026 fits");
            assert_eq!(r.column(), rec.columns.current);
            assert_eq!(r.elements(300), rec.elements(300));
            let bytes = r.encode();
            assert_eq!(bytes.len(), 14 + usize::from(bits).div_ceil(8));
            assert_eq!(DedupeRef::decode(&bytes), Some(r));
        }
        assert_eq!(DedupeRef::decode(&[0; 14]), None);
        assert_eq!(DedupeRef::decode(&[0; 23]), None);
    }

    #[test]
    fn prefix_bits_follow_the_rate() {
        assert_eq!(prefix_bits_for_rate(0), 1);
        // 2.07 × 1M / 2^17 = 15.8 ≤ 25, and 2^16 would give 31.6.
        assert_eq!(prefix_bits_for_rate(1_000_000), 17);
        assert_eq!(prefix_bits_for_rate(300_000_000_000), 35);
    }
}

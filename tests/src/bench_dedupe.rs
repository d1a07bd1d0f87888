//! The Dedupe table's figures for `./scripts/bench log`: what an idempotent append and a duplicate
//! cost on the emulator, and how big the items grow at the configured key rate.
//!
//! Item sizes need months of keys at the production rate (a million a month by default), which no
//! emulator run can write. They come from a simulation that builds every item with the code the
//! stores use (`DedupeRecord::elements`, `MonthColumns`, `items::dedupe_item`) and sizes it with
//! DynamoDB's rules (`items::item_size`). [`check_model_on_emulator`] first writes keys through the
//! real transaction on the emulator and requires the simulated items to be byte-identical to the
//! ones DynamoDB's API returns, so the simulation models the real items, not an idea of them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use aws_sdk_dynamodb::types::AttributeValue;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sheetlog_core::aws::items::{Item, dedupe_item, item_size};
use sheetlog_core::config::LogConfig;
use sheetlog_core::domain::dedupe::{
    DedupeKey, DedupeRecord, KeyKind, MonthColumns, fingerprint, mean_keys_per_item,
    prefix_bits_for_rate,
};
use sheetlog_core::domain::{LogId, NewEntry};
use sheetlog_core::log::{AppendOnce, AppendOptions, IdempotencyKey};

use crate::fixtures::raw_set_entry;
use crate::stack::TestStack;

/// DynamoDB's storage overhead per item (the seed's "100 bytes per index"), which storage is
/// billed on in addition to the item's own bytes.
pub const ITEM_OVERHEAD_BYTES: u64 = 100;
/// The seed's naive table: a 32-character key per item plus the 100-byte overhead.
pub const NAIVE_BYTES_PER_KEY: u64 = 132;

/// Month column name → set elements, per prefix: the items as the stores keep them.
type Items = HashMap<Vec<u8>, BTreeMap<String, BTreeSet<Vec<u8>>>>;

/// Records one key in the simulated table exactly as the stores' update does: add both elements to
/// this month's column, remove the aged-out columns.
fn record(items: &mut Items, rec: &DedupeRecord, seq: u64) {
    let item = items.entry(rec.key.prefix.clone()).or_default();
    for gone in &rec.columns.removed {
        item.remove(gone);
    }
    item.entry(rec.columns.current.clone())
        .or_default()
        .extend(rec.elements(seq));
}

fn record_for(prefix_bits: u8, log: LogId, key: &str, entry: &NewEntry, now: i64) -> DedupeRecord {
    let kind = entry.kind.0.to_be_bytes();
    let version = entry.version.to_be_bytes();
    let payload = entry.payload.as_deref().unwrap_or("").as_bytes();
    DedupeRecord {
        key: DedupeKey::new(prefix_bits, log, KeyKind::Request, key),
        fingerprint: fingerprint(&[&kind, &version, &entry.body, payload]),
        columns: MonthColumns::at(now),
    }
}

/// Writes `keys` idempotent appends through the real transaction on the emulator with a short
/// prefix (so items fill up), then requires every Dedupe item read back over the wire to equal the
/// simulated one. Returns how many items were compared.
pub async fn check_model_on_emulator(
    stack: &TestStack,
    entry: &NewEntry,
    keys: usize,
) -> anyhow::Result<usize> {
    let bits = 4;
    let cfg = LogConfig {
        dedupe_prefix_bits: bits,
        ..LogConfig::default()
    };
    let log = stack.log_with(cfg)?;
    let id = log.create().await?.log;
    let mut simulated = Items::new();
    for i in 0..keys {
        let key = format!("model-{i}");
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let out = log
            .append_once(
                id,
                entry.clone(),
                AppendOptions::default(),
                &IdempotencyKey::request(&key),
            )
            .await?;
        let AppendOnce::Appended(a) = out else {
            anyhow::bail!("fresh key {key} was a duplicate");
        };
        record(
            &mut simulated,
            &record_for(bits, id, &key, entry, now),
            a.seq,
        );
    }
    let table = stack
        .resources
        .dedupe_table
        .as_deref()
        .ok_or_else(|| anyhow::anyhow!("the stack has no Dedupe table"))?;
    for (prefix, columns) in &simulated {
        let real = stack
            .dynamo
            .get_item()
            .table_name(table)
            .key("p", AttributeValue::B(prefix.clone().into()))
            .consistent_read(true)
            .send()
            .await?
            .item
            .unwrap_or_default();
        let model = dedupe_item(prefix, columns);
        anyhow::ensure!(
            item_size(&real) == item_size(&model) && same_sets(&real, &model),
            "simulated Dedupe item {prefix:02x?} differs from the emulator's: {} vs {} bytes",
            item_size(&model),
            item_size(&real)
        );
    }
    Ok(simulated.len())
}

fn same_sets(a: &Item, b: &Item) -> bool {
    let norm = |i: &Item| -> BTreeMap<String, BTreeSet<Vec<u8>>> {
        i.iter()
            .map(|(k, v)| {
                let set = match v {
                    AttributeValue::Bs(s) => s.iter().map(|b| b.as_ref().to_vec()).collect(),
                    AttributeValue::B(b) => BTreeSet::from([b.as_ref().to_vec()]),
                    _ => BTreeSet::new(),
                };
                (k.clone(), set)
            })
            .collect()
    };
    norm(a) == norm(b)
}

/// The table after two full months at `keys_per_month` and the first grace days of the third
/// (its fullest moment: three columns live).
#[derive(Debug, Serialize)]
pub struct DedupeFill {
    pub keys_per_month: u64,
    pub prefix_bits: u8,
    pub keys_stored: u64,
    pub items: u64,
    pub keys_per_item_mean: f64,
    pub keys_per_item_max: u64,
    pub item_bytes_p50: u64,
    pub item_bytes_p99: u64,
    pub item_bytes_max: u64,
    /// Share of items of more than 1 KB (which would cost 2 WRU per write instead of 1).
    pub items_over_1kb: f64,
    /// Stored bytes per key, items plus the 100-byte per-item overhead, next to the naive 132.
    pub bytes_per_key: f64,
}

/// Simulates the fill with random keys over `logs` logs; seqs are uniform below 2^20 (3 bytes).
pub fn simulate_fill(keys_per_month: u64, seed: u64) -> DedupeFill {
    let bits = prefix_bits_for_rate(keys_per_month);
    let mut rng = StdRng::seed_from_u64(seed);
    let logs: Vec<LogId> = (0..1000).map(|_| LogId::new_random()).collect();
    let entry = raw_set_entry(b"\x01\x00\x02B3");
    let month_start = |m: u8| {
        time::Date::from_calendar_date(
            2026,
            time::Month::try_from(m).unwrap_or(time::Month::January),
            1,
        )
        .map(|d| d.midnight().assume_utc().unix_timestamp())
        .unwrap_or(0)
    };
    let (jan, feb, mar) = (month_start(1), month_start(2), month_start(3));
    let grace_secs = i64::from(sheetlog_core::domain::dedupe::GRACE_DAYS) * 86_400;
    // (start, length in seconds, keys): January, February, and 1–2 March.
    let periods = [
        (jan, feb - jan, keys_per_month),
        (feb, mar - feb, keys_per_month),
        (
            mar,
            grace_secs,
            keys_per_month * grace_secs as u64 / (31 * 86_400),
        ),
    ];
    let mut items = Items::new();
    let mut keys_stored = 0u64;
    for (start, len, count) in periods {
        // Keys arrive in time order, as the writes would.
        let mut times: Vec<i64> = (0..count)
            .map(|_| start + rng.random_range(0..len))
            .collect();
        times.sort_unstable();
        for now in times {
            let log = logs[rng.random_range(0..logs.len())];
            let key = uuid::Uuid::from_u128(rng.random()).to_string();
            let rec = record_for(bits, log, &key, &entry, now);
            record(&mut items, &rec, rng.random_range(1..1 << 20));
            keys_stored += 1;
        }
    }
    let mut sizes = Vec::with_capacity(items.len());
    let mut keys_max = 0u64;
    for (prefix, columns) in &items {
        sizes.push(item_size(&dedupe_item(prefix, columns)));
        let keys: u64 = columns.values().map(|s| s.len() as u64 / 2).sum();
        keys_max = keys_max.max(keys);
    }
    sizes.sort_unstable();
    let at = |p: f64| sizes[((sizes.len() - 1) as f64 * p).round() as usize];
    let total: u64 = sizes.iter().sum();
    // Items never written are not stored; the mean is over the 2^n that can exist.
    let possible = 1u64 << bits;
    DedupeFill {
        keys_per_month,
        prefix_bits: bits,
        keys_stored,
        items: sizes.len() as u64,
        keys_per_item_mean: keys_stored as f64 / possible as f64,
        keys_per_item_max: keys_max,
        item_bytes_p50: at(0.5),
        item_bytes_p99: at(0.99),
        item_bytes_max: sizes.last().copied().unwrap_or(0),
        items_over_1kb: sizes.iter().filter(|&&s| s > 1024).count() as f64 / sizes.len() as f64,
        bytes_per_key: (total + ITEM_OVERHEAD_BYTES * sizes.len() as u64) as f64
            / keys_stored as f64,
    }
}

/// Hot items under load: with `in_flight` idempotent appends at once (random keys, any logs),
/// the share of them whose Dedupe item another in-flight append also writes. On AWS those pairs
/// are the ones that can be cancelled with `TransactionConflict` and retried.
pub fn conflict_share(prefix_bits: u8, in_flight: usize, trials: usize, seed: u64) -> f64 {
    let mut rng = StdRng::seed_from_u64(seed);
    let log = LogId::new_random();
    let mut shared = 0usize;
    for _ in 0..trials {
        let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
        for _ in 0..in_flight {
            let key = uuid::Uuid::from_u128(rng.random()).to_string();
            *seen
                .entry(DedupeKey::new(prefix_bits, log, KeyKind::Request, &key).prefix)
                .or_default() += 1;
        }
        shared += seen.values().filter(|&&n| n > 1).sum::<usize>();
    }
    shared as f64 / (in_flight * trials) as f64
}

/// `n` and the expected mean keys per item for a few key rates (the table in docs/storage.md).
pub fn prefix_table(rates: &[u64]) -> Vec<(u64, u8, f64)> {
    rates
        .iter()
        .map(|&r| {
            let n = prefix_bits_for_rate(r);
            (r, n, mean_keys_per_item(r, n))
        })
        .collect()
}

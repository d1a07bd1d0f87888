//! `./scripts/bench log`: what each event-log operation costs in DynamoDB request units and item
//! bytes (computed with AWS's published rules from the items actually written to the emulator),
//! plus latency and contention figures on the emulator. Units and bytes carry over to AWS;
//! latencies do not (the emulator is one local Python process).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::Serialize;
use sheetlog_core::aws::items::{entry_key, item_size};
use sheetlog_core::domain::{EntryType, LogId, NewEntry, RequestUnits};
use sheetlog_core::log::{AppendOnce, AppendOptions, IdempotencyKey, SegmentHint};

use crate::bench_dedupe;
use crate::fixtures::{event_entry, pushed_set};
use crate::stack::{AwsLog, TestStack};

/// One operation's cost.
#[derive(Debug, Serialize)]
pub struct OpCost {
    pub operation: &'static str,
    pub read_units: f64,
    pub write_units: f64,
    /// Size of the Entry item written, where the operation writes one.
    pub item_bytes: Option<u64>,
    pub note: &'static str,
}

/// The sync routes through the HTTP API, units counted on the wire (measured by the bench
/// binary, `functions/bench/src/api_costs.rs`, which fills this in).
#[derive(Debug, Default, Serialize)]
pub struct ApiSyncCosts {
    /// A Replicache push of one mutation by a client that pushed before, to a warm API process
    /// (it holds the log's segment hint).
    pub api_push_one_mutation_rru: f64,
    pub api_push_one_mutation_wru: f64,
    /// The same push to a fresh API process (a cold Lambda: no segment hint).
    pub api_push_one_mutation_cold_rru: f64,
    pub api_push_one_mutation_cold_wru: f64,
    /// A pull whose cookie is current, warm and cold.
    pub idle_pull_rru: f64,
    pub idle_pull_cold_rru: f64,
    /// Cognito authorization: `GET /sheets`, one page (50) of a person's 1,000 sheets.
    pub list_sheets_rru: f64,
    /// Cognito authorization: the catalog access check of one request, when the instance has
    /// no cached role (a cached one costs nothing).
    pub access_check_rru: f64,
    /// Read units `DELETE /logs/{logId}` spends on other sheets' sync clients: the Clients-table
    /// units of a sheet's delete with 10,000 other sheets' clients in the table, less those of a
    /// like sheet's delete with none (it was a Scan of the whole table, at least twice).
    pub delete_clients_rru_other_logs: f64,
    /// `POST /logs/{logId}/undo` of a one-cell `set` pushed just before, on a log of a few
    /// entries, warm: the head read, the entries read for the group's stacks, and the `undo`
    /// entry's append (its cells are read from S3, not counted here).
    pub undo_rru: f64,
    pub undo_wru: f64,
}

#[derive(Debug, Serialize)]
pub struct LogBench {
    #[serde(flatten)]
    pub api: ApiSyncCosts,
    /// An archived segment of one-cell entries: S3 bytes per entry, and a reader's requests.
    #[serde(flatten)]
    pub archive: crate::bench_archive::ArchiveBench,
    /// A maximal push applied by the sync writer, and another editor's wait meanwhile.
    #[serde(flatten)]
    pub max_push: crate::bench_max_push::MaxPushBench,
    pub append_rru: f64,
    pub append_wru: f64,
    pub set_cell_item_bytes: u64,
    pub append_no_hint_rru: f64,
    pub append_latency_ms_p50: f64,
    pub append_latency_ms_p99: f64,
    pub contended_writers: usize,
    pub contended_appends: usize,
    pub contended_appends_per_s: f64,
    pub contended_attempts_p50: u32,
    pub contended_attempts_max: u32,
    /// An append with an idempotency key (entry + Dedupe item in one transaction), with a hint.
    pub idempotent_append_wru: f64,
    pub idempotent_append_rru: f64,
    /// A retry of it: the cancelled transaction is charged, nothing is written.
    pub duplicate_append_wru: f64,
    pub duplicate_append_rru: f64,
    /// Dedupe items after two simulated months at the configured rate (`bench_dedupe`).
    pub dedupe_keys_per_month: u64,
    pub dedupe_prefix_bits: u8,
    pub dedupe_item_bytes_p50: u64,
    pub dedupe_item_bytes_p99: u64,
    pub dedupe_item_bytes_max: u64,
    pub dedupe_items_over_1kb: f64,
    pub dedupe_keys_per_item_mean: f64,
    pub dedupe_keys_per_item_max: u64,
    pub dedupe_bytes_per_key: f64,
    pub dedupe_naive_bytes_per_key: u64,
    /// Items compared byte for byte between the simulation and the emulator.
    pub dedupe_model_items_checked: usize,
    /// Share of appends sharing a Dedupe item with another of 100 in flight.
    pub dedupe_conflict_share_100_in_flight: f64,
    pub dedupe_prefix_bits_by_rate: Vec<(u64, u8, f64)>,
    /// A push of one mutation by a client that pushed before: entry + range item in one
    /// transaction, after a strong range query and the head read (with a segment hint).
    pub push_one_mutation_wru: f64,
    pub push_one_mutation_rru: f64,
    /// One push of 100 one-cell `set` mutations: one entry and one range item.
    pub push_100_mutations_wru: f64,
    pub push_100_mutations_rru: f64,
    /// A client's first push also joins its group (a third item).
    pub push_first_mutation_wru: f64,
    /// A push of one `set` with a `baseSeq` ten row inserts old: the push also reads the ten
    /// entries it is rebased through (docs/sync.md, "Edits made against an older view").
    pub rebased_push_wru: f64,
    pub rebased_push_rru: f64,
    /// The Entry item of a one-cell `set` carried in a `mutations` entry (client and mutation ids
    /// included, 20-character ids as Replicache makes them).
    pub mutations_entry_item_bytes: u64,
    /// Its range item in the Clients table.
    pub client_range_item_bytes: u64,
    pub operations: Vec<OpCost>,
}

/// The sync figures: what pushes cost and how big their items are.
struct SyncCosts {
    first_wru: f64,
    one: RequestUnits,
    hundred: RequestUnits,
    rebased: RequestUnits,
    entry_bytes: u64,
    range_bytes: u64,
}

async fn sync_costs(stack: &TestStack) -> anyhow::Result<SyncCosts> {
    use sheetlog_core::aws::items::client_range_to_item;
    use sheetlog_core::log::{RunOutcome, RunSource};

    let log = stack.log()?;
    let id = log.create().await?.log;
    // Replicache's ids are 18 to 20 characters.
    let (group, client) = ("9r0v4e2kqbdv6s5m1h3c", "b8t2n6x0f4z7c1q9w3e5");
    let set = |i: u64| pushed_set(i, &[("B7", serde_json::json!(42))]);
    let applied = |out: RunOutcome| match out {
        RunOutcome::Applied {
            range, appended, ..
        } => Ok((range, appended)),
        other => Err(anyhow::anyhow!("nothing applied: {other:?}")),
    };
    let (_, first) = applied(
        log.push_run(id, group, client, &[set(1)], None, RunSource::Push)
            .await?,
    )?;
    let (range, one) = applied(
        log.push_run(
            id,
            group,
            client,
            &[set(2)],
            Some(first.hint),
            RunSource::Push,
        )
        .await?,
    )?;
    let entry_bytes = entry_item_bytes(stack, id, one.segment, one.entry).await?;
    let range_bytes = item_size(&client_range_to_item(id, &range));
    let batch: Vec<_> = (3..=102).map(set).collect();
    let (_, hundred) = applied(
        log.push_run(id, group, client, &batch, Some(one.hint), RunSource::Push)
            .await?,
    )?;
    // Ten rows inserted by someone else after the client's view: its next edit is rebased.
    let base = hundred.next_seq;
    let mut hint = hundred.hint;
    for _ in 0..10 {
        let a = log
            .append(
                id,
                event_entry(
                    serde_json::json!({"type": "insert-rows", "body": {"at": 2, "count": 1}}),
                ),
                AppendOptions {
                    segment_hint: Some(hint),
                    ..Default::default()
                },
            )
            .await?;
        hint = a.hint;
    }
    let mut stale = set(103);
    stale.base = Some(base);
    let (_, rebased) = applied(
        log.push_run(id, group, client, &[stale], Some(hint), RunSource::Push)
            .await?,
    )?;
    Ok(SyncCosts {
        first_wru: first.units.write,
        one: one.units,
        hundred: hundred.units,
        rebased: rebased.units,
        entry_bytes,
        range_bytes,
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn op(
    operation: &'static str,
    u: RequestUnits,
    item_bytes: Option<u64>,
    note: &'static str,
) -> OpCost {
    OpCost {
        operation,
        read_units: u.read,
        write_units: u.write,
        item_bytes,
        note,
    }
}

/// Runs the benchmark. `set_cell_body` is the stored body of a one-cell `set` event (the caller
/// passes the spreadsheet model's real encoding) and `set_cell_type` its type code.
pub async fn run(set_cell_type: EntryType, set_cell_body: Bytes) -> anyhow::Result<LogBench> {
    eprintln!("starting emulator and creating tables…");
    let stack = TestStack::new("bench-log").await?;
    let mut b = Bench {
        stack: &stack,
        log: Arc::new(stack.log()?),
        kind: set_cell_type,
        body: set_cell_body.clone(),
        ops: Vec::new(),
    };
    let appends = b.appends().await?;
    let hint = b.reads_and_segment(appends.id).await?;
    let idempotent = b.idempotent(appends.id, hint).await?;
    let dedupe = b.dedupe().await?;
    let contention = contention(&b.log, set_cell_type, &set_cell_body).await?;
    let sync = b.sync().await?;

    eprintln!("archiving a segment of 2,000 one-cell entries…");
    let archive =
        crate::bench_archive::run(&stack, set_cell_type, set_cell_body.clone(), 2_000).await?;
    let max_push = crate::bench_max_push::run().await?;
    Ok(Measured {
        appends,
        idempotent,
        dedupe,
        contention,
        sync,
        archive,
        max_push,
        ops: b.ops,
    }
    .into_bench())
}

/// The log under measurement, and the operations' costs so far.
struct Bench<'a> {
    stack: &'a TestStack,
    log: Arc<AwsLog>,
    /// The type and stored body of a one-cell `set` event.
    kind: EntryType,
    body: Bytes,
    ops: Vec<OpCost>,
}

/// The plain appends: without a hint, then with one (timed, 200 of them).
struct Appends {
    id: LogId,
    first: RequestUnits,
    hinted: RequestUnits,
    /// The Entry item of a one-cell `set`.
    cell_bytes: u64,
    /// The hinted appends' latencies (ms), sorted.
    latencies: Vec<f64>,
}

/// An append with an idempotency key, and its retry.
struct Idempotent {
    keyed: RequestUnits,
    retried: RequestUnits,
}

/// The Dedupe table: the model checked on the emulator, the simulated fill, the conflicts.
struct Dedupe {
    checked: usize,
    fill: bench_dedupe::DedupeFill,
    conflicts: f64,
}

/// Concurrent writers on one log: every append's attempts (sorted), and the seconds they took.
struct Contention {
    writers: usize,
    attempts: Vec<u32>,
    elapsed: f64,
}

/// The Entry item's size in bytes (0 when there is none).
async fn entry_item_bytes(
    stack: &TestStack,
    id: LogId,
    segment: u64,
    entry: u64,
) -> anyhow::Result<u64> {
    let item = stack
        .dynamo
        .get_item()
        .table_name(&stack.resources.entry_table)
        .set_key(Some(entry_key(id, segment, entry)))
        .send()
        .await?
        .item
        .unwrap_or_default();
    Ok(item_size(&item))
}

impl Bench<'_> {
    /// A one-cell `set` entry.
    fn cell(&self) -> NewEntry {
        NewEntry::new(self.kind, 1, self.body.clone())
    }

    /// Creates the log, appends without a hint, then 200 times with one.
    async fn appends(&mut self) -> anyhow::Result<Appends> {
        let created = self.log.create().await?;
        let id = created.log;
        self.ops.push(op(
            "create log",
            created.units,
            None,
            "transaction: segment 0 + snapshot entry 0",
        ));
        let first = self
            .log
            .append(id, self.cell(), AppendOptions::default())
            .await?;
        self.ops.push(op(
            "append (no hint)",
            first.units,
            None,
            "segment query + entry query + conditional put",
        ));

        eprintln!("timing 200 uncontended appends…");
        let mut hint = first.hint;
        let mut latencies = Vec::new();
        let mut hinted = None;
        for _ in 0..200 {
            let t = Instant::now();
            let a = self
                .log
                .append(
                    id,
                    self.cell(),
                    AppendOptions {
                        expected_seq: None,
                        segment_hint: Some(hint),
                    },
                )
                .await?;
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            hint = a.hint;
            hinted = Some(a);
        }
        let hinted = hinted.ok_or_else(|| anyhow::anyhow!("no append ran"))?;
        let cell_bytes = entry_item_bytes(self.stack, id, hinted.segment, hinted.entry).await?;
        self.ops.push(op(
            "append (segment hint)",
            hinted.units,
            Some(cell_bytes),
            "entry query + conditional put; one-cell set event",
        ));
        latencies.sort_by(f64::total_cmp);
        Ok(Appends {
            id,
            first: first.units,
            hinted: hinted.units,
            cell_bytes,
            latencies,
        })
    }

    /// A 100 KB append, a read, a load and a new segment; the new segment's hint.
    async fn reads_and_segment(&mut self, id: LogId) -> anyhow::Result<SegmentHint> {
        let big = self
            .log
            .append(
                id,
                NewEntry::new(self.kind, 1, vec![0u8; 100 * 1024]),
                AppendOptions::default(),
            )
            .await?;
        self.ops.push(op(
            "append 100 KB body",
            big.units,
            None,
            "body to S3 first (1 PUT), item keeps the key",
        ));

        let page = self.log.read_since(id, 1, 100).await?;
        self.ops.push(op(
            "read 100 entries",
            page.units,
            None,
            "segment query + one entry query page",
        ));
        let loaded = self.log.load(id).await?;
        self.ops.push(op(
            "load",
            loaded.units,
            None,
            "two segments + entries since the snapshot",
        ));
        let started = self.log.start_segment(id).await?;
        self.ops.push(op(
            "start segment",
            started.units,
            None,
            "transaction of three conditional puts",
        ));
        Ok(started.hint)
    }

    /// An append with an idempotency key, then its retry, which must be a duplicate.
    async fn idempotent(&mut self, id: LogId, hint: SegmentHint) -> anyhow::Result<Idempotent> {
        eprintln!("idempotent appends…");
        let key = IdempotencyKey::request("bench-key");
        let keyed = self
            .log
            .append_once(
                id,
                self.cell(),
                AppendOptions {
                    expected_seq: None,
                    segment_hint: Some(hint),
                },
                &key,
            )
            .await?;
        let AppendOnce::Appended(keyed) = keyed else {
            anyhow::bail!("a fresh key was a duplicate");
        };
        self.ops.push(op(
            "idempotent append",
            keyed.units,
            None,
            "entry query + transaction: entry put, Dedupe update",
        ));
        let retried = self
            .log
            .append_once(
                id,
                self.cell(),
                AppendOptions {
                    expected_seq: None,
                    segment_hint: Some(keyed.hint),
                },
                &key,
            )
            .await?;
        anyhow::ensure!(
            matches!(retried, AppendOnce::Duplicate { seq, .. } if seq == keyed.seq),
            "the retry was not a duplicate of seq {}: {retried:?}",
            keyed.seq
        );
        self.ops.push(op(
            "duplicate append",
            retried.units(),
            None,
            "entry query + cancelled transaction (charged)",
        ));
        Ok(Idempotent {
            keyed: keyed.units,
            retried: retried.units(),
        })
    }

    /// The Dedupe model checked on the emulator, then two simulated months of its items.
    async fn dedupe(&self) -> anyhow::Result<Dedupe> {
        let checked = bench_dedupe::check_model_on_emulator(self.stack, &self.cell(), 300).await?;
        let rate = sheetlog_core::config::DEFAULT_DEDUPE_KEYS_PER_MONTH;
        eprintln!("simulating two months of Dedupe items at {rate} keys/month…");
        let fill = bench_dedupe::simulate_fill(rate, 7);
        let conflicts = bench_dedupe::conflict_share(fill.prefix_bits, 100, 2000, 11);
        Ok(Dedupe {
            checked,
            fill,
            conflicts,
        })
    }

    /// The sync pushes' costs ([`sync_costs`]), as operations too.
    async fn sync(&mut self) -> anyhow::Result<SyncCosts> {
        eprintln!("pushing sync mutations…");
        let sync = sync_costs(self.stack).await?;
        self.ops.push(op(
            "push 1 mutation",
            sync.one,
            Some(sync.entry_bytes),
            "entry query + index mark + client range query + transaction (entry, range item)",
        ));
        self.ops.push(op(
            "push 100 mutations",
            sync.hundred,
            None,
            "as one mutation: the 100 share one entry and one range item",
        ));
        self.ops.push(op(
            "rebased push",
            sync.rebased,
            None,
            "push 1 mutation + a read of the 10 row inserts since its baseSeq",
        ));
        Ok(sync)
    }
}

/// 8 writers appending 50 one-cell entries each to one new log, each with its own hint.
async fn contention(
    log: &Arc<AwsLog>,
    kind: EntryType,
    body: &Bytes,
) -> anyhow::Result<Contention> {
    let writers = 8;
    let per_writer = 50;
    eprintln!("{writers} writers x {per_writer} appends on one log…");
    let contended = log.create().await?.log;
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..writers {
        let log = log.clone();
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let mut attempts = Vec::new();
            let mut hint = None;
            for _ in 0..per_writer {
                let a = log
                    .append(
                        contended,
                        NewEntry::new(kind, 1, body.clone()),
                        AppendOptions {
                            expected_seq: None,
                            segment_hint: hint,
                        },
                    )
                    .await?;
                hint = Some(a.hint);
                attempts.push(a.attempts);
            }
            Ok::<_, sheetlog_core::LogError>(attempts)
        }));
    }
    let mut attempts = Vec::new();
    for task in tasks {
        attempts.extend(task.await??);
    }
    let elapsed = t.elapsed().as_secs_f64();
    attempts.sort_unstable();
    Ok(Contention {
        writers,
        attempts,
        elapsed,
    })
}

/// Everything [`run`] measured, before it is laid out as a [`LogBench`].
struct Measured {
    appends: Appends,
    idempotent: Idempotent,
    dedupe: Dedupe,
    contention: Contention,
    sync: SyncCosts,
    archive: crate::bench_archive::ArchiveBench,
    max_push: crate::bench_max_push::MaxPushBench,
    ops: Vec<OpCost>,
}

impl Measured {
    fn into_bench(self) -> LogBench {
        let Measured {
            appends: a,
            idempotent,
            dedupe,
            contention: c,
            sync,
            archive,
            max_push,
            ops,
        } = self;
        let fill = dedupe.fill;
        LogBench {
            api: ApiSyncCosts::default(),
            push_one_mutation_wru: sync.one.write,
            push_one_mutation_rru: sync.one.read,
            push_100_mutations_wru: sync.hundred.write,
            push_100_mutations_rru: sync.hundred.read,
            push_first_mutation_wru: sync.first_wru,
            rebased_push_wru: sync.rebased.write,
            rebased_push_rru: sync.rebased.read,
            mutations_entry_item_bytes: sync.entry_bytes,
            client_range_item_bytes: sync.range_bytes,
            archive,
            max_push,
            append_rru: a.hinted.read,
            append_wru: a.hinted.write,
            set_cell_item_bytes: a.cell_bytes,
            append_no_hint_rru: a.first.read,
            append_latency_ms_p50: percentile(&a.latencies, 0.5),
            append_latency_ms_p99: percentile(&a.latencies, 0.99),
            contended_writers: c.writers,
            contended_appends: c.attempts.len(),
            contended_appends_per_s: c.attempts.len() as f64 / c.elapsed,
            contended_attempts_p50: c.attempts.get(c.attempts.len() / 2).copied().unwrap_or(0),
            contended_attempts_max: c.attempts.last().copied().unwrap_or(0),
            idempotent_append_wru: idempotent.keyed.write,
            idempotent_append_rru: idempotent.keyed.read,
            duplicate_append_wru: idempotent.retried.write,
            duplicate_append_rru: idempotent.retried.read,
            dedupe_keys_per_month: fill.keys_per_month,
            dedupe_prefix_bits: fill.prefix_bits,
            dedupe_item_bytes_p50: fill.item_bytes_p50,
            dedupe_item_bytes_p99: fill.item_bytes_p99,
            dedupe_item_bytes_max: fill.item_bytes_max,
            dedupe_items_over_1kb: fill.items_over_1kb,
            dedupe_keys_per_item_mean: fill.keys_per_item_mean,
            dedupe_keys_per_item_max: fill.keys_per_item_max,
            dedupe_bytes_per_key: fill.bytes_per_key,
            dedupe_naive_bytes_per_key: bench_dedupe::NAIVE_BYTES_PER_KEY,
            dedupe_model_items_checked: dedupe.checked,
            dedupe_conflict_share_100_in_flight: dedupe.conflicts,
            dedupe_prefix_bits_by_rate: bench_dedupe::prefix_table(&[
                1_000_000,
                100_000_000,
                10_000_000_000,
                300_000_000_000,
            ]),
            operations: ops,
        }
    }
}

/// Prints the result as a table (or one JSON object).
pub fn print(b: &LogBench, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(b)?);
        return Ok(());
    }
    print_operations(&b.operations);
    print_latencies(b);
    print_dedupe(b);
    print_sync(b);
    print_archive(&b.archive);
    println!(
        "contention, {} writers on one log: {} appends at {:.0}/s, attempts p50 {} max {}",
        b.contended_writers,
        b.contended_appends,
        b.contended_appends_per_s,
        b.contended_attempts_p50,
        b.contended_attempts_max
    );
    Ok(())
}

/// The table of operations, then a blank line.
fn print_operations(operations: &[OpCost]) {
    println!(
        "{:<24} {:>10} {:>11} {:>11}  note",
        "operation", "read units", "write units", "item bytes"
    );
    for o in operations {
        let bytes = o
            .item_bytes
            .map(|b| b.to_string())
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<24} {:>10} {:>11} {:>11}  {}",
            o.operation, o.read_units, o.write_units, bytes, o.note
        );
    }
    println!();
}

/// An append's latency on the emulator, and the maximal push's.
fn print_latencies(b: &LogBench) {
    println!(
        "emulator latency, uncontended append with hint: p50 {:.1} ms, p99 {:.1} ms",
        b.append_latency_ms_p50, b.append_latency_ms_p99
    );
    println!(
        "maximal push ({} mutations with baseSeq) applied by the sync writer in {:.0} ms; \
         another editor's push on the sheet waited {:.0} ms",
        b.max_push.max_push_mutations,
        b.max_push.max_push_apply_ms,
        b.max_push.max_push_other_editor_wait_ms
    );
}

/// The Dedupe items: their sizes, their storage, and the prefix bits by rate.
fn print_dedupe(b: &LogBench) {
    println!(
        "Dedupe items after two months at {} keys/month (n = {} bits): p50 {} B, p99 {} B, max {} B, \
         {:.4}% over 1 KB; keys per item mean {:.1}, max {}",
        b.dedupe_keys_per_month,
        b.dedupe_prefix_bits,
        b.dedupe_item_bytes_p50,
        b.dedupe_item_bytes_p99,
        b.dedupe_item_bytes_max,
        b.dedupe_items_over_1kb * 100.0,
        b.dedupe_keys_per_item_mean,
        b.dedupe_keys_per_item_max
    );
    println!(
        "Dedupe storage: {:.1} bytes per key (naive table: {}); simulation matched the emulator on {} items; \
         {:.3}% of 100 in-flight appends share an item",
        b.dedupe_bytes_per_key,
        b.dedupe_naive_bytes_per_key,
        b.dedupe_model_items_checked,
        b.dedupe_conflict_share_100_in_flight * 100.0
    );
    for (rate, n, mean) in &b.dedupe_prefix_bits_by_rate {
        println!(
            "  {rate:>16} keys/month -> n = {n:>2} bits, {mean:.1} keys per item at the fullest"
        );
    }
}

/// The sync pushes, in the core and through the HTTP API, and the catalog's and delete's reads.
fn print_sync(b: &LogBench) {
    println!(
        "sync push: 1 mutation {} WRU + {} RRU (a client's first: {} WRU), 100 mutations in one push {} WRU + {} RRU, \
         1 mutation rebased through 10 row inserts {} WRU + {} RRU; mutations entry {} B, range item {} B",
        b.push_one_mutation_wru,
        b.push_one_mutation_rru,
        b.push_first_mutation_wru,
        b.push_100_mutations_wru,
        b.push_100_mutations_rru,
        b.rebased_push_wru,
        b.rebased_push_rru,
        b.mutations_entry_item_bytes,
        b.client_range_item_bytes
    );
    println!(
        "through the HTTP API: push of 1 mutation {} WRU + {} RRU warm, {} WRU + {} RRU cold; \
         unchanged pull {} RRU warm, {} RRU cold",
        b.api.api_push_one_mutation_wru,
        b.api.api_push_one_mutation_rru,
        b.api.api_push_one_mutation_cold_wru,
        b.api.api_push_one_mutation_cold_rru,
        b.api.idle_pull_rru,
        b.api.idle_pull_cold_rru
    );
    println!(
        "catalog (Cognito authorization): list one page of 50 of 1,000 sheets {} RRU; access check {} RRU on a cache miss",
        b.api.list_sheets_rru, b.api.access_check_rru
    );
    println!(
        "delete of a sheet among 10,000 other sheets' sync clients: {} RRU spent on theirs",
        b.api.delete_clients_rru_other_logs
    );
}

/// The archived segment: its bytes, and a reader's requests.
fn print_archive(a: &crate::bench_archive::ArchiveBench) {
    println!(
        "archived segment of {} one-cell entries: {} bytes in S3 ({:.1} per entry); reading it back in pages of 1000: \
         {:.1} requests per 1000 entries ({:.1} DynamoDB, {:.1} S3), {:.2} RRU",
        a.archived_entries,
        a.archive_bytes,
        a.archive_bytes_per_entry,
        a.archived_read_requests_per_1000_entries,
        a.archived_read_dynamodb_requests_per_1000_entries,
        a.archived_read_s3_requests_per_1000_entries,
        a.archived_read_rru_per_1000_entries
    );
}

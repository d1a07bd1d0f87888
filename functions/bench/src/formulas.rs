//! The `formulas` benchmark: a sheet of 1,000,000 cells of which 100,000 are formulas, in memory,
//! through the same snapshot engine and the same closure loader and evaluator the API runs.
//!
//! The sheet is 100,000 rows by 10 columns: A..H and J hold numbers; I holds the formulas, in
//! chains of 100 rows, each reading the one above it and fanning in its row,
//! `I(r) = I(r-1) + SUM(A(r):H(r))` (the first of each chain without the `I(r-1)`). A range read
//! loads the chain above it; an edit of one input dirties the rest of its chain.

use std::process::Command;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use sheetlog_core::sheet::formula;
use sheetlog_core::sheet::{CellEdit, CellRef, Event, Range, Row, SetCells, Value};
use sheetlog_core::snapshot::{
    BuildConfig, LogEntry, Manifest, MemBlobs, MemImports, ReadBudget, build_snapshot,
    compute_values, read_rows, shown_rows,
};
use uuid::Uuid;

use crate::snapshot::peak_rss_mb;

const LOG: Uuid = Uuid::from_u128(0xbe4c_0000_0000_4000_8000_0000_0000_00f1);
const ROWS: u32 = 100_000;
const COLS: u32 = 10;
/// Column I, 0-based.
const FORMULA_COL: u32 = 8;
const CHAIN: u32 = 100;

#[derive(Debug, clap::Args)]
pub struct FormulasArgs {
    /// Print one JSON object of the figures instead of a table.
    #[arg(long)]
    json: bool,
    /// Single edits timed for the recalculation figure.
    #[arg(long, default_value_t = 200)]
    edits: usize,
}

#[derive(Debug, clap::Args)]
pub struct EvalChildArgs {}

#[derive(Debug, Serialize)]
struct Figures {
    formula_sheet_cells: u64,
    formula_sheet_formulas: u64,
    /// Building the snapshot of the whole sheet from its `set` entries, from empty.
    formula_snapshot_cells_per_s: f64,
    formula_snapshot_chunks: u64,
    /// The values pass after the build: every chunk's formulas evaluated and their values kept
    /// beside the snapshot (`snapshot::compute_values`).
    formula_values_pass_ms: f64,
    formula_values_kept_chunks: u64,
    /// `A1:J1000` read from the snapshot, its formulas showing the values kept beside it,
    /// median of 20 reads.
    formula_range_read_1000_rows_ms: f64,
    /// The same read without kept values: its formulas and the chains they read evaluated.
    formula_range_read_1000_rows_evaluated_ms: f64,
    /// One input edited after the snapshot, then the rest of its chain read and evaluated.
    formula_edit_recalc_ms_p50: f64,
    formula_edit_recalc_ms_p99: f64,
    /// Every cell of the sheet evaluated in one IronCalc model, in a process of its own.
    formula_eval_full_sheet_ms: f64,
    formula_eval_peak_rss_mb: f64,
}

fn value_at(row: u32, col: u32) -> Value {
    if col == FORMULA_COL {
        let r = row + 1;
        let sum = format!("SUM(A{r}:H{r})");
        let text = if row.is_multiple_of(CHAIN) {
            sum
        } else {
            format!("I{}+{sum}", r - 1)
        };
        formula::Formula::new(&text).map_or(Value::Empty, Value::Formula)
    } else {
        Value::Number(f64::from((row * 7 + col * 3) % 100))
    }
}

/// The sheet as `set` entries of 10,000 cells each.
fn sheet_entries() -> Vec<LogEntry> {
    let cells: Vec<CellEdit> = (0..ROWS)
        .flat_map(|row| {
            (0..COLS).map(move |col| CellEdit {
                at: CellRef { row, col },
                value: value_at(row, col),
                format: None,
            })
        })
        .collect();
    cells
        .chunks(10_000)
        .enumerate()
        .map(|(i, c)| LogEntry::event(i as u64, Event::Set(SetCells { cells: c.to_vec() })))
        .collect()
}

fn sheet_rows() -> Vec<Row> {
    (0..ROWS)
        .map(|row| Row {
            index: row,
            cells: (0..COLS)
                .map(|col| {
                    (
                        col,
                        sheetlog_core::sheet::Cell::new(value_at(row, col), None),
                    )
                })
                .collect(),
        })
        .collect()
}

/// Reads `range` as of the end of `entries` after `base`, its formulas replaced by their values
/// (kept beside the snapshot, or evaluated): what `GET /logs/{logId}/cells` does, in memory.
async fn read_shown(
    store: &MemBlobs,
    base: &Manifest,
    entries: &[LogEntry],
    range: Range,
) -> anyhow::Result<Vec<Row>> {
    let payloads = MemImports::default();
    let (rows, _) = read_rows(
        store,
        &payloads,
        LOG,
        Some(base),
        entries,
        range,
        ReadBudget::UNLIMITED,
    )
    .await?;
    Ok(shown_rows(store, &payloads, LOG, Some(base), entries, range, rows).await?)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(f64::NAN)
}

pub fn run(args: FormulasArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let store = MemBlobs::default();
    eprintln!(
        "building the snapshot of {} cells ({} formulas)",
        ROWS * COLS,
        ROWS
    );
    let entries = sheet_entries();
    let seq = entries.len() as u64;
    let started = Instant::now();
    let built = rt.block_on(build_snapshot(
        &store,
        &MemImports::default(),
        BuildConfig::default(),
        LOG,
        seq,
        None,
        entries,
    ))?;
    let build_s = started.elapsed().as_secs_f64();
    let base = rt.block_on(built.read_manifest(&store))?;
    anyhow::ensure!(
        base.chunks.iter().map(|c| c.formulas).sum::<u64>() == u64::from(ROWS),
        "the chunks count every formula"
    );

    let evaluated_reads = range_reads(&rt, &store, &base)?;
    eprintln!("keeping the formulas' values beside the snapshot");
    let started = Instant::now();
    let kept = rt.block_on(compute_values(&store, &MemImports::default(), &base, None))?;
    let values_pass_ms = ms(started);
    anyhow::ensure!(
        kept.kept_formulas == u64::from(ROWS),
        "every formula's value kept: {kept:?}"
    );
    let reads = range_reads(&rt, &store, &base)?;
    let recalcs = edit_recalcs(&rt, &store, &base, seq, args.edits)?;
    eprintln!("evaluating the whole sheet in a child process");
    let out = Command::new(std::env::current_exe()?)
        .arg("formula-eval-child")
        .output()
        .context("running the evaluation child")?;
    anyhow::ensure!(
        out.status.success(),
        "child: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let child: serde_json::Value = serde_json::from_slice(&out.stdout)?;

    let f = Figures {
        formula_sheet_cells: u64::from(ROWS * COLS),
        formula_sheet_formulas: u64::from(ROWS),
        formula_snapshot_cells_per_s: f64::from(ROWS * COLS) / build_s,
        formula_snapshot_chunks: built.chunks,
        formula_values_pass_ms: values_pass_ms,
        formula_values_kept_chunks: kept.kept_chunks as u64,
        formula_range_read_1000_rows_ms: percentile(&reads, 0.5),
        formula_range_read_1000_rows_evaluated_ms: percentile(&evaluated_reads, 0.5),
        formula_edit_recalc_ms_p50: percentile(&recalcs, 0.5),
        formula_edit_recalc_ms_p99: percentile(&recalcs, 0.99),
        formula_eval_full_sheet_ms: child["ms"].as_f64().unwrap_or(f64::NAN),
        formula_eval_peak_rss_mb: child["peak_rss_mb"].as_f64().unwrap_or(f64::NAN),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print_table(&f);
    }
    Ok(())
}

/// `A1:J1000` read 20 times, its formulas shown: each read's milliseconds, sorted.
fn range_reads(
    rt: &tokio::runtime::Runtime,
    store: &MemBlobs,
    base: &Manifest,
) -> anyhow::Result<Vec<f64>> {
    eprintln!("range reads of A1:J1000");
    let range: Range = "A1:J1000".parse()?;
    let mut reads = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let rows = rt.block_on(read_shown(store, base, &[], range))?;
        reads.push(ms(t));
        let last = rows
            .last()
            .and_then(|r| r.cells.get(FORMULA_COL as usize))
            .map(|c| c.1.value.clone());
        anyhow::ensure!(
            matches!(last, Some(Value::Number(_))),
            "I1000 computed: {last:?}"
        );
    }
    reads.sort_by(f64::total_cmp);
    Ok(reads)
}

/// `edits` single edits after the snapshot at `seq`, each followed by a read of the rest of its
/// chain: the milliseconds of each read, sorted.
fn edit_recalcs(
    rt: &tokio::runtime::Runtime,
    store: &MemBlobs,
    base: &Manifest,
    seq: u64,
    edits: usize,
) -> anyhow::Result<Vec<f64>> {
    eprintln!(
        "{} single edits, each followed by a read of the rest of its chain",
        edits
    );
    let mut recalcs = Vec::new();
    for i in 0..edits {
        let row = (i as u32 * 7_919) % ROWS;
        let edit = LogEntry::event(
            seq,
            Event::Set(SetCells {
                cells: vec![CellEdit {
                    at: CellRef { row, col: 0 },
                    value: Value::Number(1_000.0),
                    format: None,
                }],
            }),
        );
        let chain_end = (row / CHAIN + 1) * CHAIN;
        let dirty: Range = format!("I{}:I{}", row + 1, chain_end).parse()?;
        let t = Instant::now();
        let rows = rt.block_on(read_shown(store, base, std::slice::from_ref(&edit), dirty))?;
        recalcs.push(ms(t));
        anyhow::ensure!(
            rows.len() == (chain_end - row) as usize,
            "the chain's rows came back"
        );
    }
    recalcs.sort_by(f64::total_cmp);

    Ok(recalcs)
}

fn print_table(f: &Figures) {
    println!(
        "formulas: {} cells, {} formulas",
        f.formula_sheet_cells, f.formula_sheet_formulas
    );
    println!(
        "  snapshot build          {:>12.0} cells/s ({} chunks)",
        f.formula_snapshot_cells_per_s, f.formula_snapshot_chunks
    );
    println!(
        "  values pass             {:>12.0} ms ({} chunks kept)",
        f.formula_values_pass_ms, f.formula_values_kept_chunks
    );
    println!(
        "  range read A1:J1000     {:>12.1} ms median with kept values, {:.1} ms evaluated",
        f.formula_range_read_1000_rows_ms, f.formula_range_read_1000_rows_evaluated_ms
    );
    println!(
        "  one edit, chain read    {:>12.1} ms p50, {:.1} ms p99",
        f.formula_edit_recalc_ms_p50, f.formula_edit_recalc_ms_p99
    );
    println!(
        "  whole sheet evaluated   {:>12.0} ms, peak RSS {:.0} MB",
        f.formula_eval_full_sheet_ms, f.formula_eval_peak_rss_mb
    );
}

/// Runs in the child: the whole sheet evaluated in one model; prints the time and peak RSS.
pub fn eval_child(_: EvalChildArgs) -> anyhow::Result<()> {
    let rows = sheet_rows();
    let t = Instant::now();
    let evaluated = formula::evaluate(&rows)?;
    let elapsed = ms(t);
    anyhow::ensure!(
        evaluated.values.len() == ROWS as usize,
        "every formula evaluated"
    );
    let last = evaluated.values.get(&CellRef {
        row: ROWS - 1,
        col: FORMULA_COL,
    });
    anyhow::ensure!(
        matches!(last, Some(Value::Number(_))),
        "the last chain computed: {last:?}"
    );
    println!(
        "{}",
        serde_json::json!({"ms": elapsed, "peak_rss_mb": peak_rss_mb()?})
    );
    Ok(())
}

//! Chooses the chunk target by measurement: for each target, a 1M-cell sample sheet built from
//! scratch, then the bytes written by the incremental snapshot after 100 clustered edits (the
//! benchmark's C40001:L40010 block) and after inserting a row at row 11, the manifest's size, and
//! a 1,000-row range read. `cargo run --profile bench-local -p sheetlog-sheet --features sample
//! --example chunk_sweep -- [targets in KiB, comma-separated]`.

use std::time::Instant;

use sheetlog_sheet::entry::EntryBody;
use sheetlog_sheet::event::{CellEdit, Event, Import, ImportFormat, InsertRows, SetCells};
use sheetlog_sheet::sample::write_sample_csv;
use sheetlog_sheet::snapshot::{
    BuildConfig, ImportSource, LogEntry, MemBlobs, MemImports, build_snapshot, read_range,
};
use sheetlog_sheet::{CellRef, Range, Value};

const LOG: uuid::Uuid = uuid::Uuid::from_u128(1);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let targets: Vec<u32> = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "16,32,64,128,256".into())
        .split(',')
        .map(|s| s.parse::<u32>().map(|k| k << 10))
        .collect::<Result<_, _>>()?;
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 100_000)?;
    let payloads = MemImports::new();
    payloads.insert("1m.csv", csv);
    let p: &dyn ImportSource = &payloads;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    println!(
        "target_kib,chunks,full_bytes,manifest_bytes,edits_bytes,edits_blobs,edits_pct,insert_bytes,insert_blobs,range_read_ms,range_chunks"
    );
    for t in targets {
        rt.block_on(async {
            let cfg = BuildConfig { chunk_target: t };
            let store = MemBlobs::new();
            let import = LogEntry {
                seq: 0,
                entry: EntryBody::Event(Event::Import(Import {
                    format: ImportFormat::Csv,
                })),
                payload: Some("1m.csv".into()),
            };
            let full = build_snapshot(&store, p, cfg, LOG, 1, None, [import]).await?;
            let full_bytes = store.stats().bytes;
            let edits: Vec<LogEntry> = (0..100u32)
                .map(|i| {
                    LogEntry::event(
                        1 + u64::from(i),
                        Event::Set(SetCells {
                            cells: vec![CellEdit {
                                at: CellRef {
                                    row: 40_000 + i / 10,
                                    col: 2 + i % 10,
                                },
                                value: Value::Text(format!("edited {i}")),
                                format: None,
                            }],
                        }),
                    )
                })
                .collect();
            store.reset_stats();
            let inc = build_snapshot(&store, p, cfg, LOG, 101, Some(full.manifest.clone()), edits)
                .await?;
            let e = store.stats();
            store.reset_stats();
            let insert = LogEntry::event(
                1,
                Event::InsertRows(InsertRows {
                    at: sheetlog_sheet::event::RowNumber(10),
                    count: 1,
                    values: vec![vec![Value::Text("Nails".into()), Value::Number(0.01)]],
                }),
            );
            build_snapshot(
                &store,
                p,
                cfg,
                LOG,
                2,
                Some(full.manifest.clone()),
                [insert],
            )
            .await?;
            let ins = store.stats();
            let range: Range = "A50001:J51000".parse()?;
            let mut best = f64::MAX;
            let mut chunks = 0;
            for _ in 0..5 {
                let started = Instant::now();
                let (_, st) = read_range(&store, p, LOG, Some(&full.manifest), &[], range).await?;
                best = best.min(started.elapsed().as_secs_f64() * 1e3);
                chunks = st.chunks_loaded;
            }
            println!(
                "{},{},{},{},{},{},{:.2},{},{},{:.3},{}",
                t >> 10,
                full.manifest.chunks.len(),
                full_bytes,
                inc.manifest_bytes,
                e.bytes,
                e.puts,
                e.bytes as f64 * 100.0 / full_bytes as f64,
                ins.bytes,
                ins.puts,
                best,
                chunks
            );
            Ok::<_, Box<dyn std::error::Error>>(())
        })?;
    }
    Ok(())
}

//! A from-scratch snapshot build of a sample CSV, timed, for profiling the engine on its own
//! (`perf record` on this binary; the benchmark proper is `./scripts/bench snapshot`).
//!
//! `cargo run --profile bench-local -p sheetlog-sheet --features sample --example build_profile
//! -- <rows> [<columns-multiple>] [fs|discard]`: builds `rows` lines of `10 × multiple` sample
//! cells, then imports them into a snapshot, and prints seconds, cells/s and peak RSS.

use std::io::{BufWriter, Write};
use std::time::Instant;

use sheetlog_sheet::entry::EntryBody;
use sheetlog_sheet::event::{Event, Import, ImportFormat};
use sheetlog_sheet::sample::sample_fields;
use sheetlog_sheet::snapshot::{
    BlobStore, BuildConfig, FsBlobs, FsImports, LogEntry, MemBlobs, SnapshotBuilder,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let rows: u64 = args.get(1).map_or(Ok(100_000), |s| s.parse())?;
    let per_line: u64 = args.get(2).map_or(Ok(1), |s| s.parse())?;
    let fs_store = args.get(3).is_none_or(|s| s == "fs");
    let dir = std::env::temp_dir().join(format!("sheetlog-build-profile-{rows}x{per_line}"));
    std::fs::create_dir_all(&dir)?;
    let csv = dir.join("in.csv");
    if !csv.exists() {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&csv)?);
        let mut line = String::new();
        for i in 0..rows {
            line.clear();
            for k in 0..per_line {
                for (j, f) in sample_fields(i * per_line + k).iter().enumerate() {
                    if k > 0 || j > 0 {
                        line.push(',');
                    }
                    line.push_str(f);
                }
            }
            line.push('\n');
            w.write_all(line.as_bytes())?;
        }
        w.flush()?;
    }
    let out = dir.join("store");
    let _ = std::fs::remove_dir_all(&out);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let payloads = FsImports::new(dir.clone());
    let (fs, mem);
    let store: &dyn BlobStore = if fs_store {
        fs = FsBlobs::new(&out);
        &fs
    } else {
        mem = MemBlobs::discarding();
        &mem
    };
    let entries = [LogEntry {
        seq: 0,
        entry: EntryBody::Event(Event::Import(Import {
            format: ImportFormat::Csv,
        })),
        payload: Some("in.csv".into()),
    }];
    let started = Instant::now();
    let mut checkpoints = 0u64;
    let built = rt.block_on(
        SnapshotBuilder::new(
            store,
            &payloads,
            BuildConfig::default(),
            uuid::Uuid::from_u128(1),
            1,
            None,
            entries,
        )?
        .run(|cp| checkpoints += u64::from(serde_json::to_vec(&cp).is_ok())),
    )?;
    let secs = started.elapsed().as_secs_f64();
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap_or("?")
        .trim()
        .to_owned();
    println!(
        "{} cells in {secs:.2} s = {:.2} M cells/s; {} chunks, {} bytes stored, {checkpoints} checkpoints; peak RSS {hwm}",
        built.manifest.cells,
        built.manifest.cells as f64 / secs / 1e6,
        built.manifest.chunks.len(),
        built.manifest.stored_bytes(),
    );
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}

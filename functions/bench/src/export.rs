//! The `export` benchmark: a sheet of `--cells` cells (10M by default, the sample business sheet
//! of the `snapshot` benchmark) built into a snapshot on a filesystem store, then written as an
//! XLSX workbook by `snapshot::xlsx_export` in a child process, as the API writes one: the rate,
//! the child's peak memory and the file's size, on two CPUs and pinned to one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use sheetlog_core::snapshot::diff::Version;
use sheetlog_core::snapshot::xlsx_export::export_xlsx;
use sheetlog_core::snapshot::{FsBlobs, FsImports, load_manifest};

use crate::snapshot::{
    LOG, child_command, cpu_seconds, fs_stores, peak_rss_mb, run_child, sample_shape, write_csv,
};

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Print one JSON object of the figures instead of a table.
    #[arg(long)]
    json: bool,
    /// Cells in the sheet exported.
    #[arg(long, default_value_t = 10_000_000)]
    cells: u64,
}

#[derive(Debug, clap::Args)]
pub struct ExportChildArgs {
    /// The filesystem store holding the snapshot at sequence 1.
    #[arg(long)]
    store_dir: PathBuf,
    /// Where the workbook goes; the writer's temporary files go beside it.
    #[arg(long)]
    out: PathBuf,
}

/// What the export child reports on stdout.
#[derive(Debug, Serialize, Deserialize)]
struct ChildReport {
    cells: u64,
    rows: u32,
    bytes: u64,
    seconds: f64,
    cpu_seconds: f64,
    peak_rss_mb: f64,
    /// The worksheet's XML, uncompressed: what the writer's temporary file held before the zip.
    worksheet_xml_bytes: u64,
}

#[derive(Debug, Serialize)]
struct Figures {
    xlsx_export_cells: u64,
    xlsx_export_rows: u32,
    xlsx_export_bytes: u64,
    /// Two CPUs: the reads on one thread, the writer on another, as on a Lambda of 1,769 MB
    /// or more.
    xlsx_export_seconds: f64,
    xlsx_export_cells_per_s: f64,
    xlsx_export_peak_rss_mb: f64,
    /// Temporary storage the export needs at its peak: the worksheet's XML and the file.
    xlsx_export_tmp_bytes: u64,
    /// Pinned to one CPU.
    xlsx_export_cells_per_s_1cpu: f64,
    xlsx_export_cells_per_cpu_s_1cpu: f64,
    xlsx_export_peak_rss_mb_1cpu: f64,
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let (stores, _) = fs_stores()?;
    let (lines, per_line) = sample_shape(args.cells);
    say(&format!(
        "generating a {}-cell CSV ({lines} lines x {} columns)",
        args.cells,
        10 * per_line
    ));
    let csv = tmp.path().join("export.csv");
    write_csv(&csv, lines, per_line)?;
    let store = stores.path().join("store-export");
    say("building its snapshot (child process, filesystem store)");
    let built = run_child(&csv, Some(&store))?;
    std::fs::remove_file(&csv)?;
    say("writing it as XLSX (child process, two CPUs)");
    let two = run_export_child(&store, tmp.path(), None)?;
    say("again, pinned to one CPU");
    let one = run_export_child(&store, tmp.path(), Some(0))?;
    if two.cells != built.cells || one.cells != built.cells {
        bail!(
            "the export wrote {} and {} cells of the {} built",
            two.cells,
            one.cells,
            built.cells
        );
    }
    let f = Figures {
        xlsx_export_cells: two.cells,
        xlsx_export_rows: two.rows,
        xlsx_export_bytes: two.bytes,
        xlsx_export_seconds: two.seconds,
        xlsx_export_cells_per_s: two.cells as f64 / two.seconds,
        xlsx_export_peak_rss_mb: two.peak_rss_mb,
        xlsx_export_tmp_bytes: two.worksheet_xml_bytes + two.bytes,
        xlsx_export_cells_per_s_1cpu: one.cells as f64 / one.seconds,
        xlsx_export_cells_per_cpu_s_1cpu: one.cells as f64 / one.cpu_seconds,
        xlsx_export_peak_rss_mb_1cpu: one.peak_rss_mb,
    };
    if args.json {
        println!("{}", serde_json::to_string(&f)?);
    } else {
        println!("{:<36} {:>14}", "cells", f.xlsx_export_cells);
        println!("{:<36} {:>14}", "file bytes", f.xlsx_export_bytes);
        println!(
            "{:<36} {:>14}",
            "temporary bytes (XML + file)", f.xlsx_export_tmp_bytes
        );
        println!(
            "{:<36} {:>14.0}",
            "cells/s (2 CPUs)", f.xlsx_export_cells_per_s
        );
        println!(
            "{:<36} {:>14.1}",
            "peak RSS MB (2 CPUs)", f.xlsx_export_peak_rss_mb
        );
        println!(
            "{:<36} {:>14.0}",
            "cells/s (1 CPU)", f.xlsx_export_cells_per_s_1cpu
        );
        println!(
            "{:<36} {:>14.0}",
            "cells per CPU-second (1 CPU)", f.xlsx_export_cells_per_cpu_s_1cpu
        );
        println!(
            "{:<36} {:>14.1}",
            "peak RSS MB (1 CPU)", f.xlsx_export_peak_rss_mb_1cpu
        );
    }
    Ok(())
}

fn say(s: &str) {
    eprintln!("[bench export] {s}");
}

fn run_export_child(store: &Path, tmp: &Path, cpu: Option<u32>) -> anyhow::Result<ChildReport> {
    let mut cmd = child_command(cpu)?;
    let out = tmp.join("export.xlsx");
    cmd.arg("export-child")
        .arg("--store-dir")
        .arg(store)
        .arg("--out")
        .arg(&out);
    let done = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running the export child")?;
    if !done.status.success() {
        bail!("export child failed ({})", done.status);
    }
    let _ = std::fs::remove_file(&out);
    Ok(serde_json::from_slice(&done.stdout)?)
}

/// Runs in the child: the snapshot at sequence 1 of the store, written as XLSX.
pub fn child(args: ExportChildArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let store = FsBlobs::new(&args.store_dir);
    let payloads = FsImports::new(&args.store_dir);
    let tempdir = args.out.parent().context("--out has no directory")?;
    let report = rt.block_on(async {
        let base = load_manifest(&store, LOG, 1)
            .await?
            .context("no snapshot at sequence 1 in the store")?;
        let cpu_started = cpu_seconds()?;
        let started = Instant::now();
        let mut tenth = 0;
        let stats = export_xlsx(
            &store,
            &payloads,
            LOG,
            Version {
                base: Some(&base),
                entries: &[],
            },
            (&args.out, tempdir),
            &mut |done, of| {
                let now = u64::from(done) * 10 / u64::from(of.max(1));
                if now > tenth {
                    tenth = now;
                    eprintln!("[bench export] {done} of {of} rows");
                }
                std::ops::ControlFlow::Continue(())
            },
        )
        .await?;
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&args.out)?)?;
        let worksheet_xml_bytes = zip.by_name("xl/worksheets/sheet1.xml")?.size();
        anyhow::Ok(ChildReport {
            worksheet_xml_bytes,
            cells: stats.cells,
            rows: stats.rows,
            bytes: stats.bytes,
            seconds: started.elapsed().as_secs_f64(),
            cpu_seconds: cpu_seconds()? - cpu_started,
            peak_rss_mb: peak_rss_mb()?,
        })
    })?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

//! `import`: what validating an upload costs the API function, in memory and time.
//!
//! - A 256 MB CSV (the default upload limit) goes through the real upload flow on the emulator:
//!   `POST /uploads`, a `PUT` by `curl` to the presigned URL (so the client's memory is not the
//!   API's), then `POST /commit`, which copies, streams the copy to a temporary file and validates
//!   it. The API runs in a child process, so the peak resident memory reported is the API's own.
//! - An XLSX zip bomb (300 MB of zeros deflated to a few hundred KB) is validated in another child:
//!   the time until it is refused, and the peak memory.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sheetlog_core::sheet::ImportFormat;
use sheetlog_sheet::import;
use sheetlog_tests::api::{TestApi, begin_import, commit_upload, json_object, json_str};

use crate::pipeline::round1;
use crate::snapshot::{peak_rss_mb, write_csv_of_size};

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Print one JSON object of the figures instead of a table.
    #[arg(long)]
    json: bool,
    /// Size of the CSV upload, in MiB.
    #[arg(long, default_value_t = 256)]
    csv_mib: u64,
}

#[derive(Debug, clap::Args)]
pub struct ImportChildArgs {
    /// `commit` (the CSV upload through the API) or `bomb` (validate an XLSX bomb).
    #[arg(long)]
    case: String,
    #[arg(long)]
    file: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
struct ChildReport {
    ms: f64,
    peak_rss_mb: f64,
    /// What the validation answered: the commit's status and error code, or the import error.
    outcome: String,
    baseline_rss_mb: f64,
}

pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let csv = dir.path().join("upload.csv");
    eprintln!("import: writing a {} MiB CSV ...", args.csv_mib);
    // Just under the limit (the last row may overshoot the target by a line), three sample rows
    // to a line (30 columns, about 330 bytes) so 256 MB stays within the sheet's 1,048,576 rows.
    let (rows, bytes) = write_csv_of_size(&csv, args.csv_mib * 1024 * 1024 - 4096, 3)?;
    eprintln!("import: {rows} rows, {bytes} bytes; committing through the API ...");
    let commit = run_child("commit", &csv)?;
    eprintln!("import: building an XLSX bomb ...");
    let bomb = dir.path().join("bomb.xlsx");
    let bomb_bytes = write_bomb(&bomb)?;
    let refused = run_child("bomb", &bomb)?;
    let out = json!({
        "csv_bytes": bytes,
        "csv_rows": rows,
        "commit_outcome": commit.outcome,
        "commit_ms": commit.ms.round(),
        "validate_peak_rss_mb_256mb_csv": round1(commit.peak_rss_mb),
        "api_baseline_rss_mb": round1(commit.baseline_rss_mb),
        "xlsx_bomb_bytes": bomb_bytes,
        "xlsx_bomb_inflates_to_bytes": BOMB_INFLATED,
        "xlsx_bomb_outcome": refused.outcome,
        "xlsx_bomb_rejected_ms": refused.ms.round(),
        "xlsx_bomb_peak_rss_mb": round1(refused.peak_rss_mb),
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("Import validation (API function, child process)");
        println!(
            "  {} MiB CSV, {rows} rows: commit {} in {:.1} s, peak RSS {:.1} MB (at start {:.1} MB)",
            args.csv_mib,
            commit.outcome,
            commit.ms / 1000.0,
            commit.peak_rss_mb,
            commit.baseline_rss_mb
        );
        println!(
            "  XLSX bomb, {bomb_bytes} bytes -> {BOMB_INFLATED} bytes: {} in {:.0} ms, peak RSS {:.1} MB",
            refused.outcome, refused.ms, refused.peak_rss_mb
        );
    }
    Ok(())
}

const BOMB_INFLATED: u64 = 300 * 1024 * 1024;

/// PUTs `file` to the presigned URL of an upload answer (`{"url", "headers"}`) with curl, which
/// streams it from disk in its own process, so this process's memory stays out of the figures.
pub(crate) fn curl_put(upload: &Value, file: &Path) -> anyhow::Result<()> {
    let mut put = Command::new("curl");
    put.args(["-sSf", "-X", "PUT", "-T"]).arg(file);
    for (k, v) in json_object(upload, "/headers") {
        put.arg("-H")
            .arg(format!("{k}: {}", v.as_str().unwrap_or_default()));
    }
    let status = put.arg(json_str(upload, "/url")).status()?;
    anyhow::ensure!(status.success(), "curl PUT failed: {status}");
    Ok(())
}

fn write_bomb(path: &Path) -> anyhow::Result<u64> {
    let file = std::fs::File::create(path)?;
    let mut zip = zip::ZipWriter::new(file);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    zip.start_file("[Content_Types].xml", opts)?;
    zip.write_all(b"<Types/>")?;
    zip.start_file("xl/sharedStrings.xml", opts)?;
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..BOMB_INFLATED / zeros.len() as u64 {
        zip.write_all(&zeros)?;
    }
    zip.finish()?;
    Ok(std::fs::metadata(path)?.len())
}

fn run_child(case: &str, file: &Path) -> anyhow::Result<ChildReport> {
    let out = Command::new(std::env::current_exe()?)
        .args(["import-child", "--case", case, "--file"])
        .arg(file)
        .output()
        .context("running the import child")?;
    if !out.status.success() {
        bail!(
            "import child ({case}) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

pub fn child(args: ImportChildArgs) -> anyhow::Result<()> {
    let report = match args.case.as_str() {
        "commit" => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(commit(&args.file))?,
        "bomb" => {
            let baseline_rss_mb = peak_rss_mb()?;
            let reader = std::io::BufReader::new(std::fs::File::open(&args.file)?);
            let started = Instant::now();
            let res = import::validate(ImportFormat::Xlsx, Box::new(reader));
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            ChildReport {
                ms,
                peak_rss_mb: peak_rss_mb()?,
                outcome: match res {
                    Ok(s) => format!("accepted ({} rows)", s.rows),
                    Err(e) => format!("refused: {e}"),
                },
                baseline_rss_mb,
            }
        }
        other => bail!("unknown case {other:?}"),
    };
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

async fn commit(file: &Path) -> anyhow::Result<ChildReport> {
    let api = TestApi::start("bench-import").await?;
    let c = api.client().await?;
    let size = std::fs::metadata(file)?.len();
    let (log, u) = begin_import(&c, &api, size).await?;
    curl_put(&u, file)?;

    let baseline_rss_mb = peak_rss_mb()?;
    let started = Instant::now();
    let r = commit_upload(&c, &api, &log, &u).await?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let status = r.status();
    let body: Value = r.json().await?;
    let outcome = match body["error"]["code"].as_str() {
        Some(code) => format!("{status} {code}"),
        None => format!("{status} seq {}", body["seq"]),
    };
    Ok(ChildReport {
        ms,
        peak_rss_mb: peak_rss_mb()?,
        outcome,
        baseline_rss_mb,
    })
}

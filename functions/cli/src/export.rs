//! `export`: the sheet as CSV (read by range, written here) or as the XLSX workbook the server
//! writes (downloaded), to a file or stdout.

use std::io::IsTerminal;
use std::path::Path;

use clap::ValueEnum;
use serde_json::json;
use sheetlog_client::api::{Api, CliError};
use sheetlog_client::commands::{self, out};

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    Csv,
    Xlsx,
}

/// `export`: the sheet as CSV to `output` or stdout; the summary on stderr with `--json`,
/// on stdout when written to a file.
pub(crate) async fn csv(
    api: &Api,
    json_out: bool,
    log: &str,
    at: Option<u64>,
    output: Option<&Path>,
    raw: bool,
) -> Result<(), CliError> {
    let done = match output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(CliError::io(format!("creating {}", path.display())))?;
            commands::export(api, log, at, raw, std::io::BufWriter::new(file)).await?
        }
        None => commands::export(api, log, at, raw, std::io::stdout().lock()).await?,
    };
    let summary = json!({"seq": done.seq, "rows": done.rows, "columns": done.columns,
            "requests": done.requests});
    if json_out {
        eprintln!("{summary}");
    } else if output.is_some() {
        out(&format!(
            "exported {} rows x {} columns as of sequence {}",
            done.rows, done.columns, done.seq
        ))?;
    }
    Ok(())
}

/// `export --format xlsx`: the server's workbook, to a file or stdout.
pub(crate) async fn xlsx(
    api: &Api,
    json_out: bool,
    log: &str,
    at: Option<u64>,
    output: Option<&Path>,
) -> Result<(), CliError> {
    let done = match output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(CliError::io(format!("creating {}", path.display())))?;
            commands::export_xlsx(api, log, at, std::io::BufWriter::new(file)).await?
        }
        None => {
            if std::io::stdout().is_terminal() {
                return Err(CliError::Input(
                    "an XLSX workbook is binary: pass -o FILE, or redirect stdout".into(),
                ));
            }
            commands::export_xlsx(api, log, at, std::io::stdout().lock()).await?
        }
    };
    let summary = json!({"seq": done.seq, "bytes": done.bytes, "cached": done.cached});
    if json_out {
        eprintln!("{summary}");
    } else if output.is_some() {
        out(&format!(
            "exported the sheet as of sequence {} as XLSX ({} bytes)",
            done.seq, done.bytes
        ))?;
    }
    Ok(())
}

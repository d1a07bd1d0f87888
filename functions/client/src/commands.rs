//! The CLI's commands against a sheetlog API. Each returns the JSON it prints with `--json` and
//! writes its human-readable lines itself; long work shows progress on stderr (hidden when stderr
//! is not a terminal).

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use futures::TryStreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::Method;
use serde_json::{Value, json};

use crate::api::{Api, CliError};

/// Entries per page when reading the log.
const PAGE: u32 = 1000;

/// `REF=VALUE` as a cell edit: a number, `true`/`false`, nothing (empty the cell), a formula
/// (`A1==SUM(B1:B3)`) or text; a leading `'` keeps the rest as text (`A1='42`, `A1='=1+1`), as
/// spreadsheets do.
pub fn parse_assignment(arg: &str) -> Result<Value, CliError> {
    let (cell, raw) = arg.split_once('=').ok_or_else(|| {
        CliError::Input(format!("{arg:?} is not REF=VALUE (e.g. A1=42 or B2=text)"))
    })?;
    let cell: sheetlog_sheet::CellRef = cell.trim().parse().map_err(|e| {
        CliError::Input(format!(
            "{:?} is not a cell reference like A1 or BC12: {e}",
            cell.trim()
        ))
    })?;
    let value = if let Some(text) = raw.strip_prefix('\'') {
        // The API reads a string that starts with `=` as a formula; its own leading `'` keeps
        // such a text a text.
        if sheetlog_sheet::formula::needs_quote(text) {
            json!(format!("'{text}"))
        } else {
            json!(text)
        }
    } else if raw.is_empty() {
        Value::Null
    } else if raw == "true" || raw == "false" {
        json!(raw == "true")
    } else if let Some(n) = raw
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && !raw.starts_with('+') && !raw.ends_with('.'))
    {
        json!(n)
    } else {
        json!(raw)
    };
    Ok(json!({"ref": cell.to_string(), "value": value}))
}

/// What an append is made against: refuse unless the log is exactly at a sequence, or rebase from
/// the sequence the edit was read at.
#[derive(Debug, Clone, Copy)]
pub enum Based {
    Expected(u64),
    Base(u64),
}

/// Appends one entry (with a fresh idempotency key, so the retries of [`Api::send`] append once),
/// for client group `group` when given (a step of its undo stack).
pub async fn append(
    api: &Api,
    log: &str,
    kind: &str,
    body: Value,
    at: Option<Based>,
    group: Option<&str>,
) -> Result<Value, CliError> {
    let mut req = json!({"type": kind, "body": body});
    if let Some(g) = group {
        req["clientGroupId"] = json!(g);
    }
    match at {
        Some(Based::Expected(seq)) => req["expectedSeq"] = json!(seq),
        Some(Based::Base(seq)) => req["baseSeq"] = json!(seq),
        None => {}
    }
    let key = uuid::Uuid::new_v4().to_string();
    api.send(
        Method::POST,
        &format!("logs/{log}/entries"),
        Some(&req),
        Some(&key),
    )
    .await
}

/// Restores the sheet as of sequence `seq` (`POST /logs/{log}/restore`, with a fresh idempotency
/// key so a retry restores once); `expected` is the log's next sequence the caller looked at.
pub async fn restore(
    api: &Api,
    log: &str,
    seq: u64,
    expected: Option<u64>,
) -> Result<Value, CliError> {
    let mut req = json!({ "seq": seq });
    if let Some(e) = expected {
        req["expectedSeq"] = json!(e);
    }
    let key = uuid::Uuid::new_v4().to_string();
    api.send(
        Method::POST,
        &format!("logs/{log}/restore"),
        Some(&req),
        Some(&key),
    )
    .await
}

/// Undoes (`what` = `undo`) or redoes (`redo`) the last change of client group `group`, with a
/// fresh idempotency key so a retry of [`Api::send`] acts once.
pub async fn undo(api: &Api, log: &str, group: &str, what: &str) -> Result<Value, CliError> {
    let key = uuid::Uuid::new_v4().to_string();
    api.send(
        Method::POST,
        &format!("logs/{log}/{what}"),
        Some(&json!({ "clientGroupId": group })),
        Some(&key),
    )
    .await
}

/// The content type the API expects for an import file, by its extension.
fn content_type(path: &Path) -> Result<&'static str, CliError> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("csv") => Ok("text/csv"),
        Some("xlsx") => Ok("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        _ => Err(CliError::Input(format!(
            "{}: only .csv and .xlsx files can be imported",
            path.display()
        ))),
    }
}

/// The upload flow: ask for a presigned PUT, stream the file to it with a progress bar, commit
/// (the API copies and validates the file, then appends the `import` entry) with a spinner.
pub async fn import(api: &Api, log: &str, path: &Path) -> Result<Value, CliError> {
    let ctype = content_type(path)?;
    let file = tokio::fs::File::open(path)
        .await
        .map_err(CliError::io(format!("opening {}", path.display())))?;
    let size = file
        .metadata()
        .await
        .map_err(CliError::io(format!(
            "reading the size of {}",
            path.display()
        )))?
        .len();
    let upload = api
        .post(
            &format!("logs/{log}/uploads"),
            &json!({"type": "import", "contentType": ctype, "size": size}),
        )
        .await?;
    let field = |name: &str| {
        upload[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| CliError::Other(format!("the upload answer has no {name}: {upload}")))
    };
    let (url, upload_id) = (field("url")?, field("uploadId")?);

    let bar = ProgressBar::new(size).with_style(
        ProgressStyle::with_template(
            "uploading {bar:32} {bytes}/{total_bytes} {bytes_per_sec} {eta} left",
        )
        .map_err(|e| CliError::Other(e.to_string()))?,
    );
    let progress = bar.clone();
    let stream = tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024)
        .inspect_ok(move |chunk| progress.inc(chunk.len() as u64));
    let mut put = api
        .plain()
        .put(&url)
        .body(reqwest::Body::wrap_stream(stream));
    if let Some(headers) = upload["headers"].as_object() {
        for (k, v) in headers {
            if let Some(v) = v.as_str() {
                put = put.header(k.as_str(), v);
            }
        }
    }
    let resp = put.send().await.map_err(|e| CliError::Unreachable {
        url: "the upload URL".into(),
        source: e.into(),
    })?;
    bar.finish_and_clear();
    if !resp.status().is_success() {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        return Err(CliError::Other(format!(
            "the upload was refused by storage ({status}): {}",
            text.chars().take(300).collect::<String>()
        )));
    }

    let spinner = ProgressBar::new_spinner().with_message(format!(
        "committing: the API copies and checks {size} bytes, then appends the import"
    ));
    spinner.enable_steady_tick(Duration::from_millis(120));
    let committed = api
        .post(
            &format!("logs/{log}/uploads/{upload_id}/commit"),
            &json!({}),
        )
        .await;
    spinner.finish_and_clear();
    committed
}

/// One line about an entry for `history`: what it did, in a spreadsheet's words.
pub fn describe(entry: &Value) -> String {
    let body = &entry["body"];
    let count = body["count"].as_u64().unwrap_or(1);
    let at = match &body["at"] {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    match entry["type"].as_str().unwrap_or("?") {
        "set" => {
            let cells = body["cells"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            let shown: Vec<String> = cells
                .iter()
                .take(4)
                .map(|c| format!("{}={}", c["ref"].as_str().unwrap_or("?"), c["value"]))
                .collect();
            let more = cells.len().saturating_sub(shown.len());
            let mut s = format!("set {}", shown.join(" "));
            if more > 0 {
                s += &format!(" (+{more} more)");
            }
            s
        }
        "insert-rows" => format!("insert {count} row(s) at {at}"),
        "delete-rows" => format!("delete {count} row(s) from {at}"),
        "insert-columns" => format!("insert {count} column(s) at {at}"),
        "delete-columns" => format!("delete {count} column(s) from {at}"),
        "import" => format!(
            "import {} file",
            body["format"].as_str().unwrap_or("a").to_uppercase()
        ),
        "restore" => format!("restore the sheet as of sequence {}", body["seq"]),
        "undo" => {
            let t = &body["target"];
            let what = if body["redo"] == true { "redo" } else { "undo" };
            let target = match t["clientID"].as_str() {
                Some(c) => format!(
                    "client {c}'s mutation {} (entry {})",
                    t["mutationID"], t["seq"]
                ),
                None => format!("entry {}", t["seq"]),
            };
            let skipped = body["skipped"].as_u64().unwrap_or(0);
            let mut s = format!(
                "{what} {target} for group {}",
                body["clientGroupID"].as_str().unwrap_or("?")
            );
            if skipped > 0 {
                s += &format!(" ({skipped} left alone)");
            }
            s
        }
        "mutations" => {
            // One client's run, or a group commit's runs (queued pushes of several clients).
            let runs = match body["runs"].as_array() {
                Some(runs) => runs.iter().collect(),
                None => vec![body],
            };
            let n: usize = runs
                .iter()
                .map(|r| r["mutations"].as_array().map_or(0, Vec::len))
                .sum();
            match runs.as_slice() {
                [one] => format!(
                    "{n} edit(s) from client {}",
                    one["clientID"].as_str().unwrap_or("?")
                ),
                many => format!("{n} edit(s) from {} clients", many.len()),
            }
        }
        "snapshot" => match entry["snapshotStatus"].as_str() {
            Some(status) => format!("snapshot ({status})"),
            None => "snapshot".into(),
        },
        "end-segment" => "end of segment".into(),
        other => other.to_owned(),
    }
}

/// Reads the log from `from` (or its oldest retained entry, when `from` is older) page by page
/// and hands each entry to `each`; memory stays one page. Returns the sequence after the last.
pub async fn read_log(
    api: &Api,
    log: &str,
    from: u64,
    mut each: impl FnMut(&Value) -> Result<(), CliError>,
) -> Result<u64, CliError> {
    let mut from = from;
    loop {
        let page = match api
            .get(&format!("logs/{log}/entries?from={from}&limit={PAGE}"))
            .await
        {
            Ok(page) => page,
            Err(e) => match truncated_at(&e) {
                // The log no longer holds `from`: continue at its first entry.
                Some(first) if first > from => {
                    from = first;
                    continue;
                }
                _ => return Err(e),
            },
        };
        let entries = page["entries"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        for e in entries {
            each(e)?;
        }
        let next = page["nextSeq"].as_u64().unwrap_or(from);
        if page["complete"].as_bool().unwrap_or(true) || entries.is_empty() || next <= from {
            return Ok(next);
        }
        from = next;
    }
}

/// The characters that make a spreadsheet program read a CSV field as a formula (or, for tab and
/// carriage return, hide one behind them): OWASP's "CSV injection" list.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Text as an exported CSV field: a text that a spreadsheet program would run as a formula
/// (`=HYPERLINK(…)`, a DDE payload such as `=cmd|' /C calc'!A0`, `@SUM(…)`) gets a leading `'`,
/// as OWASP recommends, so the program shows it as text. `raw` (`sheetlog export --raw`) keeps
/// every text as it is. Numbers never pass here: a cell holding -1.5 is a number.
pub fn neutralise(text: &str, raw: bool) -> std::borrow::Cow<'_, str> {
    if !raw && text.starts_with(FORMULA_STARTS) {
        format!("'{text}").into()
    } else {
        text.into()
    }
}

/// A cell value as a CSV field: text (neutralised unless `raw`, see [`neutralise`]), numbers as
/// JSON writes them, TRUE/FALSE, an error's code (`#DIV/0!`), nothing for an empty cell.
fn csv_field(v: &Value, raw: bool) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => neutralise(s, raw).into_owned(),
        Value::Bool(b) => if *b { "TRUE" } else { "FALSE" }.into(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) => o
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        Value::Array(_) => v.to_string(),
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Copy)]
pub struct Exported {
    pub seq: u64,
    pub rows: u64,
    pub columns: u32,
    pub requests: u64,
}

/// Writes the sheet as of `at` (default: now) as CSV: its extent first, then range reads of
/// whole rows, at most 100,000 cells (the API's limit) and 1,000 rows each, all pinned to one
/// sequence so the file is one consistent version. Memory stays one block; empty rows at the end
/// are left out. A block too large for one response (long texts) is read in halves. Texts that
/// would run as formulas are neutralised unless `raw` ([`neutralise`]).
pub async fn export(
    api: &Api,
    log: &str,
    at: Option<u64>,
    raw: bool,
    w: impl Write,
) -> Result<Exported, CliError> {
    let path = match at {
        Some(at) => format!("logs/{log}/extent?at={at}"),
        None => format!("logs/{log}/extent"),
    };
    let extent = api.get(&path).await?;
    let num = |k: &str| {
        extent[k]
            .as_u64()
            .ok_or_else(|| CliError::Other(format!("the extent answer has no {k}: {extent}")))
    };
    let (seq, rows, columns) = (num("seq")?, num("rows")?, num("columns")? as u32);
    let mut out = csv::WriterBuilder::new().flexible(true).from_writer(w);
    let mut done = Exported {
        seq,
        rows: 0,
        columns,
        requests: 1,
    };
    if rows == 0 {
        return Ok(done);
    }
    let last_col = sheetlog_sheet::a1::column_name(columns.saturating_sub(1));
    let mut block = (100_000 / u64::from(columns)).clamp(1, 1000);
    let bar = ProgressBar::new(rows).with_style(
        ProgressStyle::with_template("exporting {bar:32} {pos}/{len} rows {eta} left")
            .map_err(|e| CliError::Other(e.to_string()))?,
    );
    let mut empty_run = 0u64;
    let mut row = 1u64;
    while row <= rows {
        let end = (row + block - 1).min(rows);
        let range = format!("A{row}:{last_col}{end}");
        done.requests += 1;
        let page = match api
            .get(&format!("logs/{log}/cells?range={range}&at={seq}"))
            .await
        {
            Ok(page) => page,
            Err(CliError::Api { status: 413, .. }) if block > 1 => {
                block = (block / 2).max(1);
                continue;
            }
            Err(e) => return Err(e),
        };
        let values = page["values"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        for r in values {
            let fields: Vec<String> = r
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
                .iter()
                .map(|v| csv_field(v, raw))
                .collect();
            if fields.iter().all(String::is_empty) {
                empty_run += 1;
                continue;
            }
            for _ in 0..empty_run {
                write_record(&mut out, &[""])?;
            }
            done.rows += empty_run + 1;
            empty_run = 0;
            // Trailing empty fields are left out, as spreadsheets write CSV.
            let used = fields
                .iter()
                .rposition(|f| !f.is_empty())
                .map_or(0, |i| i + 1);
            write_record(&mut out, &fields[..used])?;
        }
        bar.inc(end - row + 1);
        row = end + 1;
    }
    bar.finish_and_clear();
    out.flush().map_err(CliError::io("writing the CSV"))?;
    Ok(done)
}

/// What an XLSX export downloaded.
#[derive(Debug, Clone, Copy)]
pub struct ExportedFile {
    pub seq: u64,
    pub bytes: u64,
    /// The server had written this version's file before.
    pub cached: bool,
}

/// Downloads the sheet as of `at` (default: now) as an XLSX workbook: the server writes it
/// (`GET …/export?format=xlsx`) and answers a presigned URL, read from S3 straight into `w` a
/// piece at a time, with a progress bar.
pub async fn export_xlsx(
    api: &Api,
    log: &str,
    at: Option<u64>,
    mut w: impl Write,
) -> Result<ExportedFile, CliError> {
    let path = match at {
        Some(at) => format!("logs/{log}/export?format=xlsx&at={at}"),
        None => format!("logs/{log}/export?format=xlsx"),
    };
    let spinner = ProgressBar::new_spinner().with_message("the server is writing the workbook");
    spinner.enable_steady_tick(Duration::from_millis(120));
    let answer = api.get(&path).await;
    spinner.finish_and_clear();
    let answer = answer?;
    let field = |k: &str| {
        answer[k]
            .as_u64()
            .ok_or_else(|| CliError::Other(format!("the export answer has no {k}: {answer}")))
    };
    let (seq, bytes) = (field("seq")?, field("bytes")?);
    let url = answer["url"]
        .as_str()
        .ok_or_else(|| CliError::Other(format!("the export answer has no url: {answer}")))?;
    let resp = api
        .plain()
        .get(url)
        .send()
        .await
        .map_err(|e| CliError::Unreachable {
            url: "the export's download URL".into(),
            source: e.into(),
        })?;
    if !resp.status().is_success() {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        return Err(CliError::Other(format!(
            "the download was refused by storage ({status}): {}",
            text.chars().take(300).collect::<String>()
        )));
    }
    let bar = ProgressBar::new(bytes).with_style(
        ProgressStyle::with_template("downloading {bar:32} {bytes}/{total_bytes} {eta} left")
            .map_err(|e| CliError::Other(e.to_string()))?,
    );
    let mut got = 0u64;
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.try_next().await.map_err(|e| CliError::Unreachable {
        url: "the export's download URL".into(),
        source: e.into(),
    })? {
        w.write_all(&chunk)
            .map_err(CliError::io("writing the workbook"))?;
        got += chunk.len() as u64;
        bar.set_position(got);
    }
    bar.finish_and_clear();
    w.flush().map_err(CliError::io("writing the workbook"))?;
    if got != bytes {
        return Err(CliError::Other(format!(
            "the download ended after {got} of the workbook's {bytes} bytes; run the export again"
        )));
    }
    Ok(ExportedFile {
        seq,
        bytes,
        cached: answer["cached"].as_bool().unwrap_or(false),
    })
}

fn write_record<W: Write>(
    out: &mut csv::Writer<W>,
    fields: &[impl AsRef<[u8]>],
) -> Result<(), CliError> {
    match out.write_record(fields) {
        Ok(()) => Ok(()),
        Err(e) => match e.kind() {
            csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe => {
                std::process::exit(0)
            }
            _ => Err(CliError::Other(format!("writing the CSV: {e}"))),
        },
    }
}

/// The first sequence a log still holds, from its `410 truncated` answer.
fn truncated_at(e: &CliError) -> Option<u64> {
    match e {
        CliError::Api {
            status: 410, body, ..
        } if body["error"]["code"] == "truncated" => body["error"]["firstSeq"].as_u64(),
        _ => None,
    }
}

/// Writes a line to stdout; a closed pipe (`sheetlog cat … | head`) ends quietly.
pub fn out(line: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{line}") {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        r => r.map_err(CliError::io("writing to stdout")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_read_as_a_spreadsheet_would() {
        let v = |s| parse_assignment(s).unwrap()["value"].clone();
        assert_eq!(v("A1=42"), json!(42.0));
        assert_eq!(v("A1=-1.5e3"), json!(-1500.0));
        assert_eq!(v("A1=text with = sign"), json!("text with = sign"));
        assert_eq!(v("A1='42"), json!("42"));
        assert_eq!(v("A1="), Value::Null);
        assert_eq!(v("A1=true"), json!(true));
        assert_eq!(v("A1=inf"), json!("inf"));
        assert_eq!(v("A1=NaN"), json!("NaN"));
        assert_eq!(v("A1=+1"), json!("+1"));
        assert_eq!(parse_assignment("bc12=1").unwrap()["ref"], json!("BC12"));
        for bad in ["A1", "1A=2", "A=2", "A0=1", "A1B=2", "=3"] {
            let err = parse_assignment(bad).unwrap_err();
            assert_eq!(err.exit_code(), 3, "{bad}: {err}");
        }
    }

    #[test]
    fn history_lines_say_what_an_entry_did() {
        let e = json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": 1},
            {"ref": "B1", "value": "x"}, {"ref": "C1", "value": null}, {"ref": "D1", "value": 2},
            {"ref": "E1", "value": 3}]}});
        assert_eq!(describe(&e), "set A1=1 B1=\"x\" C1=null D1=2 (+1 more)");
        assert_eq!(
            describe(&json!({"type": "insert-columns", "body": {"at": "C", "count": 2}})),
            "insert 2 column(s) at C"
        );
        assert_eq!(
            describe(&json!({"type": "snapshot", "body": {}, "snapshotStatus": "complete"})),
            "snapshot (complete)"
        );
        let run = |client: &str, n: usize| json!({"clientID": client, "mutations": vec![json!({"id": 1, "name": "set"}); n]});
        let one = json!({"type": "mutations", "body": run("c1", 2)});
        assert_eq!(describe(&one), "2 edit(s) from client c1");
        // A group commit of queued pushes: every run's edits, and how many clients made them.
        let batch = json!({"type": "mutations", "body": {"runs": [run("c1", 2), run("c2", 1)]}});
        assert_eq!(describe(&batch), "3 edit(s) from 2 clients");
        let lone = json!({"type": "mutations", "body": {"runs": [run("c3", 1)]}});
        assert_eq!(describe(&lone), "1 edit(s) from client c3");
    }

    #[test]
    fn fields_are_written_as_spreadsheets_do() {
        assert_eq!(csv_field(&json!(0.01), false), "0.01");
        assert_eq!(csv_field(&json!(42), false), "42");
        assert_eq!(csv_field(&json!(true), false), "TRUE");
        assert_eq!(csv_field(&json!({"error": "#DIV/0!"}), false), "#DIV/0!");
        assert_eq!(csv_field(&Value::Null, false), "");
    }

    #[test]
    fn only_csv_and_xlsx_are_imported() {
        assert_eq!(content_type(Path::new("a.CSV")).unwrap(), "text/csv");
        assert!(content_type(Path::new("a.xlsx")).is_ok());
        assert_eq!(content_type(Path::new("a.txt")).unwrap_err().exit_code(), 3);
    }
}

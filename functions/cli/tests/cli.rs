//! The `sheetlog` binary against the local stack (the API router on the emulator, as
//! `scripts/dev` serves it), and against a recording server for what it sends (bearer token,
//! SigV4). Each test runs the real binary and checks its output, its exit code, and the sheet
//! through the API.

use std::process::Output;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sheetlog_tests::api::{ApiConfig, TestApi, json_str};

/// A configuration directory of the tests' own (the CLI keeps its client group there), made
/// once per test binary and removed with it.
fn config_home() -> std::io::Result<&'static std::path::Path> {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    if let Some(d) = DIR.get() {
        return Ok(d.path());
    }
    let made = tempfile::tempdir()?;
    Ok(DIR.get_or_init(|| made).path())
}

fn sheetlog(api: &str, args: &[&str]) -> std::io::Result<Output> {
    std::process::Command::new(env!("CARGO_BIN_EXE_sheetlog"))
        .arg("--api")
        .arg(api)
        .args(args)
        .env_remove("SHEETLOG_TOKEN")
        .env("XDG_CONFIG_HOME", config_home()?)
        .output()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs on a blocking thread: the binary is a separate process and the API serves from this
/// test's runtime.
async fn run(api: &str, args: &[&str]) -> anyhow::Result<Output> {
    let api = api.to_owned();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    Ok(tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        sheetlog(&api, &refs)
    })
    .await??)
}

/// Runs and expects success; returns stdout.
async fn ok(api: &str, args: &[&str]) -> anyhow::Result<String> {
    let o = run(api, args).await?;
    anyhow::ensure!(
        o.status.success(),
        "sheetlog {args:?}: {:?}\n{}",
        o.status,
        stderr(&o)
    );
    Ok(stdout(&o))
}

/// The API on a fresh emulator stack, and a new log on it made by `sheetlog logs create`.
async fn api_and_log(label: &str) -> anyhow::Result<(TestApi, String, String)> {
    let api = TestApi::start(label).await?;
    let base = api.base.clone();
    let log = ok(&base, &["logs", "create"]).await?.trim().to_owned();
    anyhow::ensure!(log.len() == 36, "not a log id: {log:?}");
    Ok((api, base, log))
}

async fn cells(api: &TestApi, log: &str, range: &str) -> anyhow::Result<Value> {
    let v: Value = reqwest::Client::new()
        .get(api.url(&format!("/logs/{log}/cells?range={range}")))
        .send()
        .await?
        .json()
        .await?;
    Ok(v["values"].clone())
}

#[tokio::test(flavor = "multi_thread")]
async fn edits_a_sheet_and_reads_its_history() {
    let api = TestApi::start("cli-edit").await.unwrap();
    let base = api.base.clone();

    let created: Value =
        serde_json::from_str(&ok(&base, &["logs", "create", "--json"]).await.unwrap())
            .expect("--json prints one object");
    let log = json_str(&created, "/logId").to_owned();
    assert_eq!(created, json!({"logId": log}));
    // Without --json, just the id.
    let plain = ok(&base, &["logs", "create"]).await.unwrap();
    assert_eq!(plain.trim().len(), 36, "{plain}");

    let said = ok(
        &base,
        &["set", &log, "A1=42", "B1=some text", "C1='007", "D1=true"],
    )
    .await
    .unwrap();
    assert!(said.contains("appended at sequence 1"), "{said}");
    assert_eq!(
        cells(&api, &log, "A1:D1").await.unwrap(),
        json!([[42, "some text", "007", true]])
    );

    ok(&base, &["insert-rows", &log, "--at", "1", "--count", "2"])
        .await
        .unwrap();
    assert_eq!(cells(&api, &log, "A3:A3").await.unwrap(), json!([[42]]));
    ok(&base, &["delete-rows", &log, "--at", "1"])
        .await
        .unwrap();
    ok(&base, &["insert-columns", &log, "--at", "a"])
        .await
        .unwrap();
    assert_eq!(
        cells(&api, &log, "A2:B2").await.unwrap(),
        json!([[null, 42]])
    );
    ok(&base, &["delete-columns", &log, "--at", "A"])
        .await
        .unwrap();
    ok(&base, &["set", &log, "A2="]).await.unwrap();
    assert_eq!(
        cells(&api, &log, "A2:B2").await.unwrap(),
        json!([[null, "some text"]])
    );

    let history = ok(&base, &["history", &log]).await.unwrap();
    let lines: Vec<&str> = history.lines().collect();
    assert_eq!(lines.len(), 7, "{history}");
    assert!(lines[0].contains("snapshot"), "{history}");
    assert!(
        lines[1].contains(r#"set A1=42 B1="some text" C1="007" D1=true"#),
        "{history}"
    );
    assert!(lines[2].contains("insert 2 row(s) at 1"), "{history}");
    assert!(lines[4].contains("insert 1 column(s) at A"), "{history}");
    assert!(lines[6].contains("set A2=null"), "{history}");

    // cat: the entries as JSON lines, gapless from --from.
    let cat = ok(&base, &["cat", &log, "--from", "2"]).await.unwrap();
    let seqs: Vec<u64> = cat
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, vec![2, 3, 4, 5, 6]);
    let first: Value = serde_json::from_str(cat.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "insert-rows");
    // The command line's edits name its own client group (so `undo` can take them back).
    let group = first["body"]["clientGroupID"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(group.starts_with("cli-"), "{first}");
    assert_eq!(
        first["body"],
        json!({"at": 1, "count": 2, "clientGroupID": group})
    );

    let shown: Value =
        serde_json::from_str(&ok(&base, &["--json", "logs", "show", &log]).await.unwrap()).unwrap();
    assert_eq!(shown["nextSeq"], 7);
}

#[tokio::test(flavor = "multi_thread")]
async fn exports_any_version_as_csv() {
    let (_api, base, log) = api_and_log("cli-export").await.unwrap();
    // An empty sheet exports nothing.
    assert_eq!(ok(&base, &["export", &log]).await.unwrap(), "");
    ok(
        &base,
        &[
            "set",
            &log,
            "A1=name",
            "B1=n",
            "A2=x, quoted \"y\"",
            "B2=1.5",
        ],
    )
    .await
    .unwrap();
    ok(&base, &["set", &log, "C4=true", "B2="]).await.unwrap();
    let now = ok(&base, &["export", &log]).await.unwrap();
    assert_eq!(now, "name,n\n\"x, quoted \"\"y\"\"\"\n\"\"\n,,TRUE\n");
    // As of sequence 2: before the second set.
    let then = ok(&base, &["export", &log, "--at", "2"]).await.unwrap();
    assert_eq!(then, "name,n\n\"x, quoted \"\"y\"\"\",1.5\n");
    // Cleared cells at the edge: the extent still covers them, the CSV leaves them out.
    ok(&base, &["set", &log, "C4="]).await.unwrap();
    let cleared = ok(&base, &["export", &log]).await.unwrap();
    assert_eq!(cleared, "name,n\n\"x, quoted \"\"y\"\"\"\n");
    let o = run(&base, &["export", &log, "--at", "99"]).await.unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = run(&base, &["export", "00000000-0000-4000-8000-000000000000"])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
}

/// `export --format xlsx` downloads the server's workbook, to a file or to stdout (the same
/// bytes), now or as of an older sequence; calamine reads it back.
#[tokio::test(flavor = "multi_thread")]
async fn exports_any_version_as_xlsx() {
    use calamine::{Data, Reader, Xlsx};
    let (_api, base, log) = api_and_log("cli-export-xlsx").await.unwrap();
    ok(&base, &["set", &log, "A1=name", "B1=2", "C1==B1*21"])
        .await
        .unwrap();
    ok(&base, &["set", &log, "A1=changed"]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("now.xlsx");
    let said = ok(
        &base,
        &[
            "export",
            &log,
            "--format",
            "xlsx",
            "-o",
            file.to_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    assert!(
        said.starts_with("exported the sheet as of sequence 3 as XLSX ("),
        "{said}"
    );
    let bytes = std::fs::read(&file).unwrap();
    let read = |bytes: &[u8]| {
        let mut book = Xlsx::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
        let r = book.worksheet_range("Sheet1").unwrap();
        (0..3)
            .map(|c| r.get_value((0, c)).cloned().unwrap_or(Data::Empty))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        read(&bytes),
        [
            Data::String("changed".into()),
            Data::Float(2.0),
            Data::Float(42.0)
        ]
    );
    // To stdout when it is not a terminal: the same file.
    let o = run(&base, &["export", &log, "--format", "xlsx"])
        .await
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, bytes);
    let o = run(&base, &["export", &log, "--format", "xlsx", "--at", "2"])
        .await
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read(&o.stdout)[0], Data::String("name".into()));
    let o = run(&base, &["export", &log, "--format", "xlsx", "--at", "99"])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = run(&base, &["export", &log, "--format", "xlsx", "--raw"])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("--raw is for CSV"), "{}", stderr(&o));
}

/// `restore --at` makes the sheet what `export --at` shows, says how to undo it, and the undo
/// brings back what it replaced; a version past the end is exit 3 with nothing written.
#[tokio::test(flavor = "multi_thread")]
async fn restores_a_version_and_undoes_the_restore() {
    let (_api, base, log) = api_and_log("cli-restore").await.unwrap();
    ok(&base, &["set", &log, "A1=first", "B1=1"]).await.unwrap();
    ok(&base, &["set", &log, "A1=second", "C1=3"])
        .await
        .unwrap();
    let before = ok(&base, &["export", &log]).await.unwrap();
    let then = ok(&base, &["export", &log, "--at", "2"]).await.unwrap();
    assert_eq!(then, "first,1\n");
    let said = ok(&base, &["restore", &log, "--at", "2"]).await.unwrap();
    assert_eq!(
        said.trim(),
        "restored the sheet as of sequence 2 at sequence 3 (next 4); undo with --at 3 --expected-seq 4"
    );
    assert_eq!(ok(&base, &["export", &log]).await.unwrap(), then);
    let history = ok(&base, &["history", &log]).await.unwrap();
    assert!(
        history.contains("restore the sheet as of sequence 2"),
        "{history}"
    );
    ok(
        &base,
        &["restore", &log, "--at", "3", "--expected-seq", "4"],
    )
    .await
    .unwrap();
    assert_eq!(ok(&base, &["export", &log]).await.unwrap(), before);
    let o = run(&base, &["restore", &log, "--at", "99"]).await.unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = run(
        &base,
        &["restore", &log, "--at", "1", "--expected-seq", "1"],
    )
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
}

/// `undo` without `--group` takes back this command line's own last edit (`set`, rows and
/// columns), not an edit a page made meanwhile; `redo` puts it back; and the group is the same
/// for every command run against this API.
#[tokio::test(flavor = "multi_thread")]
async fn undoes_the_command_lines_own_last_edit() {
    let (api, base, log) = api_and_log("cli-own-undo").await.unwrap();
    ok(&base, &["set", &log, "A1=one"]).await.unwrap();
    ok(&base, &["insert-rows", &log, "--at", "1"])
        .await
        .unwrap();
    ok(&base, &["set", &log, "A1=two", "B1=x"]).await.unwrap();
    // A page's edit in between, in its own group.
    let body = json!({"pushVersion": 1, "clientGroupID": "page", "profileID": "p",
        "schemaVersion": "", "mutations": [{"clientID": "c", "id": 1, "name": "set",
        "timestamp": 1, "args": {"cells": [{"ref": "C3", "value": "page"}]}}]});
    let r = reqwest::Client::new()
        .post(api.url(&format!("/logs/{log}/replicache/push")))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    assert_eq!(
        ok(&base, &["export", &log]).await.unwrap(),
        "two,x\none\n,,page\n"
    );
    let said = ok(&base, &["undo", &log]).await.unwrap();
    // An empty first row is written as an empty quoted field.
    assert!(said.starts_with("undid entry "), "{said}");
    assert_eq!(
        ok(&base, &["export", &log]).await.unwrap(),
        "\"\"\none\n,,page\n"
    );
    ok(&base, &["undo", &log]).await.unwrap();
    assert_eq!(ok(&base, &["export", &log]).await.unwrap(), "one\n,,page\n");
    ok(&base, &["redo", &log]).await.unwrap();
    assert_eq!(
        ok(&base, &["export", &log]).await.unwrap(),
        "\"\"\none\n,,page\n"
    );
    // The edits name the command line's group; the page's push does not.
    let entries = ok(&base, &["cat", &log]).await.unwrap();
    // Three edits, two undos and a redo, all in one group.
    let groups: Vec<&str> = entries
        .match_indices("\"clientGroupID\":\"cli-")
        .map(|(i, m)| &entries[i + m.len()..i + m.len() + 36])
        .collect();
    assert_eq!(groups.len(), 6, "{entries}");
    assert!(groups.iter().all(|g| *g == groups[0]), "{entries}");
}

/// `undo --group` takes back that client group's last change only, says what it did and what
/// it left alone, `redo` puts it back, and `history` shows both; nothing left is exit 6.
#[tokio::test(flavor = "multi_thread")]
async fn undoes_and_redoes_a_client_groups_change() {
    let (api, base, log) = api_and_log("cli-undo").await.unwrap();
    let push = |group: &str, client: &str, cells: Value| {
        let body = json!({"pushVersion": 1, "clientGroupID": group, "profileID": "p",
            "schemaVersion": "", "mutations": [{"clientID": client, "id": 1, "name": "set",
            "timestamp": 1, "args": {"cells": cells}}]});
        reqwest::Client::new()
            .post(api.url(&format!("/logs/{log}/replicache/push")))
            .json(&body)
            .send()
    };
    ok(&base, &["set", &log, "A1=before"]).await.unwrap();
    let r = push(
        "ga",
        "a1",
        json!([{"ref": "A1", "value": "mine"}, {"ref": "B1", "value": 1}]),
    );
    assert!(r.await.unwrap().status().is_success());
    let r = push(
        "gb",
        "b1",
        json!([{"ref": "B1", "value": 2}, {"ref": "C1", "value": 3}]),
    );
    assert!(r.await.unwrap().status().is_success());
    let said = ok(&base, &["undo", &log, "--group", "ga"]).await.unwrap();
    assert_eq!(
        said,
        "undid client a1's mutation 1 (entry 2) at sequence 4\n1 left alone: someone else changed or deleted them since (B1)\n"
    );
    assert_eq!(ok(&base, &["export", &log]).await.unwrap(), "before,2,3\n");
    let said = ok(&base, &["redo", &log, "--group", "ga"]).await.unwrap();
    assert_eq!(
        said,
        "redid what the undo at entry 4 took back, at sequence 5\n"
    );
    assert_eq!(ok(&base, &["export", &log]).await.unwrap(), "mine,2,3\n");
    let history = ok(&base, &["history", &log]).await.unwrap();
    assert!(
        history.contains("undo client a1's mutation 1 (entry 2) for group ga (1 left alone)"),
        "{history}"
    );
    assert!(history.contains("redo entry 4 for group ga"), "{history}");
    let o = run(&base, &["redo", &log, "--group", "ga"]).await.unwrap();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(stderr(&o).contains("nothing to redo"), "{}", stderr(&o));
}

/// `diff` prints a line per changed cell between two versions; `versions --name --at` names one
/// and lists it.
#[tokio::test(flavor = "multi_thread")]
async fn diffs_two_versions_and_names_one() {
    let (_api, base, log) = api_and_log("cli-diff").await.unwrap();
    ok(&base, &["set", &log, "A1=first", "B1=1"]).await.unwrap();
    ok(&base, &["set", &log, "A1=second", "C2=new"])
        .await
        .unwrap();
    let diff = ok(&base, &["diff", &log, "--from", "2"]).await.unwrap();
    assert_eq!(diff, "A1\t\"first\"\t\"second\"\nC2\tnull\t\"new\"\n");
    let none = ok(&base, &["diff", &log, "--from", "2", "--to", "2"])
        .await
        .unwrap();
    assert_eq!(none, "");
    let listed = ok(
        &base,
        &["versions", &log, "--name", "first draft", "--at", "2"],
    )
    .await
    .unwrap();
    let line = listed.trim();
    assert!(
        line.starts_with("2  20") && line.ends_with("  first draft"),
        "{listed}"
    );
    let o = run(&base, &["versions", &log, "--name", "x"])
        .await
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(2),
        "--name needs --at: {}",
        stderr(&o)
    );
}

/// Texts a spreadsheet program would run as formulas (OWASP's CSV injection: `=`, `+`, `-`, `@`,
/// tab, carriage return first) are exported with a leading `'`; numbers, negative ones too, and
/// other texts as they are. `--raw` writes every text as stored.
#[tokio::test(flavor = "multi_thread")]
async fn export_neutralises_formulas_unless_raw() {
    let (_api, base, log) = api_and_log("cli-export-formulas").await.unwrap();
    ok(
        &base,
        &[
            "set",
            &log,
            "A1='=HYPERLINK(\"https://evil.example\",\"click\")",
            "B1='=cmd|' /C calc'!A0",
            "C1=@SUM(A1)",
            "D1=+44 20 7946 0000",
            "E1='-1.5",
            "A2=-1.5",
            "B2=\tx",
            "C2=\r=1+1",
            "D2=plain - text",
            "E2=it's",
            // A formula exports as its value.
            "A3==A2*-2",
        ],
    )
    .await
    .unwrap();
    let safe = ok(&base, &["export", &log]).await.unwrap();
    assert_eq!(
        safe,
        "\"'=HYPERLINK(\"\"https://evil.example\"\",\"\"click\"\")\",'=cmd|' /C calc'!A0,\
         '@SUM(A1),'+44 20 7946 0000,'-1.5\n\
         -1.5,'\tx,\"'\r=1+1\",plain - text,it's\n\
         3\n"
    );
    let raw = ok(&base, &["export", &log, "--raw"]).await.unwrap();
    assert_eq!(
        raw,
        "\"=HYPERLINK(\"\"https://evil.example\"\",\"\"click\"\")\",=cmd|' /C calc'!A0,\
         @SUM(A1),+44 20 7946 0000,-1.5\n\
         -1.5,\tx,\"\r=1+1\",plain - text,it's\n\
         3\n"
    );
}

/// A block of rows whose answer would pass the response limit (long texts) is read again in
/// halves until it fits: the file is whole and in order. Without the halving the export stops at
/// the first `413`.
#[tokio::test(flavor = "multi_thread")]
async fn export_reads_a_block_too_large_for_one_response_in_halves() {
    let cfg = ApiConfig {
        max_response_bytes: 64 * 1024,
        ..ApiConfig::default()
    };
    let api = TestApi::start_with("cli-export-halves", cfg).await.unwrap();
    let base = api.base.clone();
    let log = ok(&base, &["logs", "create"]).await.unwrap();
    let log = log.trim();
    // 40 rows of 2,000-byte texts: 80 KB in one block of rows, over the 64 KB limit.
    let text = |r: usize| format!("{r:02}").repeat(1000);
    let sets: Vec<String> = (1..=40).map(|r| format!("A{r}={}", text(r))).collect();
    let mut args = vec!["set", log];
    args.extend(sets.iter().map(String::as_str));
    ok(&base, &args).await.unwrap();

    let o = run(&base, &["export", log, "--json"]).await.unwrap();
    assert!(o.status.success(), "{:?}: {}", o.status, stderr(&o));
    let want: String = (1..=40).map(|r| format!("{}\n", text(r))).collect();
    assert!(
        stdout(&o) == want,
        "the export differs from the 40 rows set"
    );
    let err = stderr(&o);
    let summary: Value = serde_json::from_str(err.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(summary["rows"], 40);
    // The extent, at least one refused block, and the halves that fit.
    let requests = summary["requests"].as_u64().unwrap();
    assert!(requests >= 4, "{summary}");
}

#[tokio::test(flavor = "multi_thread")]
async fn pages_through_a_long_log() {
    let (api, base, log) = api_and_log("cli-pages").await.unwrap();
    // 1,100 entries: more than one page of 1,000.
    let c = reqwest::Client::new();
    for i in 0..1100 {
        let r = c
            .post(api.url(&format!("/logs/{log}/entries")))
            .json(&json!({"type": "set", "body": {"cells": [{"ref": "A1", "value": i}]}}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success());
    }
    let cat = ok(&base, &["cat", &log]).await.unwrap();
    let seqs: Vec<u64> = cat
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(
        seqs.len() as u64,
        seqs.last().unwrap() + 1,
        "gapless from 0"
    );
    assert!(seqs.len() > 1100, "{}", seqs.len());
    let json_history = ok(&base, &["--json", "history", &log, "--from", "1099"])
        .await
        .unwrap();
    let last: Value = serde_json::from_str(json_history.lines().last().unwrap()).unwrap();
    assert_eq!(last["summary"], "set A1=1099");
}

#[tokio::test(flavor = "multi_thread")]
async fn imports_a_csv_through_the_upload_flow() {
    let (api, base, log) = api_and_log("cli-import").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("people.csv");
    let mut text = String::from("name,score\n");
    for i in 1..=5000 {
        text += &format!("person {i},{}\n", i * 2);
    }
    std::fs::write(&csv, &text).unwrap();

    let said = ok(&base, &["import", &log, csv.to_str().unwrap()])
        .await
        .unwrap();
    assert!(
        said.contains("imported") && said.contains("sequence 1"),
        "{said}"
    );
    assert_eq!(
        cells(&api, &log, "A1:B2").await.unwrap(),
        json!([["name", "score"], ["person 1", 2]])
    );
    assert_eq!(
        cells(&api, &log, "A5001:B5001").await.unwrap(),
        json!([["person 5000", 10000]])
    );
    let history = ok(&base, &["history", &log]).await.unwrap();
    assert!(history.contains("import CSV file"), "{history}");

    // Exported (in blocks of 1,000 rows of range reads), the file comes back byte for byte.
    let exported = ok(&base, &["export", &log]).await.unwrap();
    assert_eq!(exported, text);
    let out = dir.path().join("out.csv");
    let said = ok(&base, &["export", &log, "-o", out.to_str().unwrap()])
        .await
        .unwrap();
    assert!(said.contains("exported 5001 rows x 2 columns"), "{said}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text);

    // A file the API refuses: the API's reason and exit code 3.
    let bad = dir.path().join("bad.csv");
    // One more column than a sheet has (16,384).
    std::fs::write(&bad, format!("{}\n", ",".repeat(16_384))).unwrap();
    let o = run(&base, &["import", &log, bad.to_str().unwrap()])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("invalid-payload") && stderr(&o).contains("16384"),
        "{}",
        stderr(&o)
    );
    // Not a spreadsheet file: refused before anything is sent.
    let txt = dir.path().join("notes.txt");
    std::fs::write(&txt, "x").unwrap();
    let o = run(&base, &["import", &log, txt.to_str().unwrap()])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("only .csv and .xlsx"), "{}", stderr(&o));
    let o = run(&base, &["import", &log, "/no/such/file.csv"])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("opening /no/such/file.csv"),
        "{}",
        stderr(&o)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn set_with_base_seq_follows_rows_inserted_since() {
    let (api, base, log) = api_and_log("cli-base-seq").await.unwrap();
    let printed = ok(&base, &["set", &log, "A1=r1", "A2=r2", "A3=r3"])
        .await
        .unwrap();
    // "appended at sequence 1 (next 2)": the next sequence is what this reader saw.
    let seen = printed
        .trim()
        .rsplit("next ")
        .next()
        .and_then(|s| s.trim_end_matches(')').parse::<u64>().ok())
        .expect("the next sequence is printed");
    ok(&base, &["insert-rows", &log, "--at", "1"])
        .await
        .unwrap();
    let seen = seen.to_string();
    let said = ok(&base, &["set", &log, "B2=beside r2", "--base-seq", &seen])
        .await
        .unwrap();
    assert!(said.contains("written as"), "{said}");
    assert_eq!(
        cells(&api, &log, "A3:B3").await.unwrap(),
        json!([["r2", "beside r2"]])
    );
    // Its row deleted since: exit 6 with the API's reason.
    ok(&base, &["delete-rows", &log, "--at", "3"])
        .await
        .unwrap();
    let o = run(&base, &["set", &log, "B2=again", "--base-seq", &seen])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(stderr(&o).contains("edit-rejected"), "{}", stderr(&o));
    // Both ways of saying what the edit was made against: a usage error.
    let o = run(
        &base,
        &[
            "set",
            &log,
            "B1=x",
            "--base-seq",
            "1",
            "--expected-seq",
            "1",
        ],
    )
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn deletes_a_log() {
    let (_api, base, log) = api_and_log("cli-delete").await.unwrap();
    ok(&base, &["set", &log, "A1=1"]).await.unwrap();
    let done: Value = serde_json::from_str(
        &ok(&base, &["--json", "logs", "delete", &log])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(done["done"], true, "{done}");
    let o = run(&base, &["cat", &log]).await.unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("log-deleted"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_carry_the_apis_code_and_exit_status() {
    let (_api, base, log) = api_and_log("cli-errors").await.unwrap();

    let missing = "00000000-0000-4000-8000-000000000000";
    let o = run(&base, &["set", missing, "A1=1"]).await.unwrap();
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("log-not-found"), "{}", stderr(&o));

    let o = run(&base, &["--json", "history", missing]).await.unwrap();
    assert_eq!(o.status.code(), Some(5));
    let err: Value = serde_json::from_str(stderr(&o).trim()).expect("the error as JSON");
    assert_eq!(err["error"]["code"], "log-not-found");

    let o = run(&base, &["set", "not-a-log", "A1=1"]).await.unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("invalid-log-id"), "{}", stderr(&o));

    let o = run(&base, &["set", &log, "A1=1", "--expected-seq", "7"])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(stderr(&o).contains("conflict"), "{}", stderr(&o));

    let o = run(&base, &["set", &log, "A0=1"]).await.unwrap();
    assert_eq!(o.status.code(), Some(3));
    let o = run(&base, &["insert-rows", &log, "--at", "0"])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(3));
    let o = run(&base, &["set", &log]).await.unwrap();
    assert_eq!(o.status.code(), Some(2), "usage errors are clap's");

    // Nothing was appended by any of them.
    let cat = ok(&base, &["cat", &log]).await.unwrap();
    assert_eq!(cat.lines().count(), 1, "{cat}");

    // Nobody listening.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let o = run(&format!("http://127.0.0.1:{port}"), &["logs", "create"])
        .await
        .unwrap();
    assert_eq!(o.status.code(), Some(7));
    assert!(
        stderr(&o).contains("cannot reach the API"),
        "{}",
        stderr(&o)
    );
    let o = run("ftp://example.com", &["logs", "create"]).await.unwrap();
    assert_eq!(o.status.code(), Some(3));
}

/// `sheetlog login` with `--api` at `api`, the password from the environment; a fresh config
/// directory so nothing is read from or written to the user's.
async fn login_at(api: &str) -> anyhow::Result<Output> {
    let api = api.to_owned();
    let home = tempfile::tempdir()?;
    let dir = home.path().to_owned();
    let o = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_sheetlog"))
            .args(["--api", &api, "login", "--email", "a@example.com"])
            .env("SHEETLOG_PASSWORD", "not-used-Passw0rd!")
            .env("XDG_CONFIG_HOME", &dir)
            .env_remove("SHEETLOG_TOKEN")
            .output()
    })
    .await??;
    drop(home);
    Ok(o)
}

/// `sheetlog login` reads the sign-in settings from `GET /config.json`; an answer that is not
/// a 200 (API Gateway's `401` on a route that still needs a token, a 404 from a URL that is no
/// sheetlog API) is said as such, never read as settings ("its auth mode is null").
#[tokio::test(flavor = "multi_thread")]
async fn login_says_when_config_json_is_not_there() {
    // The local stack under a path it does not serve: its 404 `not-found`.
    let api = TestApi::start("cli-login-404").await.unwrap();
    let o = login_at(&format!("{}/nowhere", api.base)).await.unwrap();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(
        err.contains("/nowhere/config.json answered HTTP 404"),
        "{err}"
    );
    assert!(!err.contains("auth mode is"), "{err}");
    // API Gateway's answer when its authorizer guards the route.
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::UNAUTHORIZED,
            axum::Json(json!({"message": "Unauthorized"})),
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let o = login_at(&base).await.unwrap();
    let err = stderr(&o);
    assert!(!o.status.success());
    assert!(err.contains("answered HTTP 401"), "{err}");
    assert!(err.contains("asks for credentials"), "{err}");
    assert!(!err.contains("auth mode is"), "{err}");
}

/// What the recording server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    uri: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// A server that records each request and answers `201 {"logId": ...}`; the first `busy`
/// requests it answers `503 busy` with `Retry-After: 0`, as the API does when writers race or AWS
/// throttles.
async fn recorder(busy: usize) -> anyhow::Result<(String, Arc<Mutex<Vec<Seen>>>)> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let s = s.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20)
                .await
                .map(|b| b.to_vec())
                .unwrap_or_default();
            let mut seen = s.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.push(Seen {
                method: parts.method.to_string(),
                uri: parts.uri.to_string(),
                headers: parts
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("?").to_owned()))
                    .collect(),
                body,
            });
            if seen.len() <= busy {
                return (
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    [("retry-after", "0")],
                    axum::Json(json!({"error": {"code": "busy", "message": "try again"}})),
                );
            }
            (
                axum::http::StatusCode::CREATED,
                [("retry-after", "")],
                axum::Json(
                    json!({"logId": "00000000-0000-4000-8000-000000000001", "seq": 0,
                    "nextSeq": 1}),
                ),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((base, seen))
}

fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[tokio::test(flavor = "multi_thread")]
async fn sends_a_bearer_token() {
    let (base, seen) = recorder(0).await.unwrap();
    let out = ok(
        &format!("{base}/prod"),
        &["--token", "tok.en.x", "logs", "create"],
    )
    .await
    .unwrap();
    assert_eq!(out.trim(), "00000000-0000-4000-8000-000000000001");
    let seen = seen.lock().unwrap()[0].clone();
    assert_eq!(seen.uri, "/prod/logs", "a base path is kept");
    assert_eq!(header(&seen, "authorization"), Some("Bearer tok.en.x"));
}

/// `--iam` signs with SigV4: the signature the server receives is the one AWS would compute for
/// the request as it arrived (method, path, headers, body), with the credentials in the
/// environment.
#[tokio::test(flavor = "multi_thread")]
async fn signs_with_sigv4_for_iam() {
    use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
    let (base, seen) = recorder(0).await.unwrap();
    let out = tokio::task::spawn_blocking({
        let base = base.clone();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_sheetlog"))
                .args(["--api", &base, "--iam", "set"])
                .args(["00000000-0000-4000-8000-000000000001", "A1=1"])
                .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
                .env(
                    "AWS_SECRET_ACCESS_KEY",
                    "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
                )
                .env("AWS_REGION", "eu-west-1")
                .env_remove("AWS_SESSION_TOKEN")
                .env_remove("AWS_PROFILE")
                .env("AWS_CONFIG_FILE", "/dev/null")
                .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let seen = seen.lock().unwrap()[0].clone();
    assert_eq!(seen.method, "POST");
    assert!(header(&seen, "idempotency-key").is_some());
    let auth = header(&seen, "authorization").expect("signed").to_owned();
    let amz_date = header(&seen, "x-amz-date").expect("x-amz-date");
    assert!(
        auth.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/{}/eu-west-1/execute-api/aws4_request",
            &amz_date[..8]
        )),
        "{auth}"
    );

    // Recompute the signature from what arrived, over the headers it names as signed (as AWS
    // does: the HTTP stack adds others, such as accept, after signing).
    let signed: Vec<&str> = auth
        .split("SignedHeaders=")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap()
        .split(';')
        .collect();
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &amz_date[0..4],
        &amz_date[4..6],
        &amz_date[6..8],
        &amz_date[9..11],
        &amz_date[11..13],
        &amz_date[13..15]
    );
    let time = std::time::SystemTime::try_from(
        aws_smithy_types::DateTime::from_str(&iso, aws_smithy_types::date_time::Format::DateTime)
            .unwrap(),
    )
    .unwrap();
    let identity = aws_credential_types::Credentials::new(
        "AKIDEXAMPLE",
        "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        None,
        None,
        "test",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("eu-west-1")
        .name("execute-api")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let headers: Vec<(String, String)> = seen
        .headers
        .iter()
        .filter(|(k, _)| signed.contains(&k.as_str()) && k != "x-amz-date")
        .cloned()
        .collect();
    let url = format!("{base}{}", seen.uri);
    let signable = SignableRequest::new(
        "POST",
        &url,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(&seen.body),
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let (expected, _) = instructions.into_parts();
    let expected = expected
        .iter()
        .find(|h| h.name() == "authorization")
        .map(|h| h.value().to_owned())
        .unwrap();
    assert_eq!(auth, expected);
}

/// A `503` is sent again after its `Retry-After`, with the same idempotency key (so the API
/// appends once); after the retries run out, the API's error and exit code 7.
#[tokio::test(flavor = "multi_thread")]
async fn retries_a_busy_api_with_the_same_idempotency_key() {
    let (base, seen) = recorder(3).await.unwrap();
    let log = "00000000-0000-4000-8000-000000000001";
    let said = ok(&base, &["set", log, "A1=1"]).await.unwrap();
    assert!(said.contains("appended at sequence 0"), "{said}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "three 503s, then the append");
    let keys: Vec<&str> = seen
        .iter()
        .map(|s| header(s, "idempotency-key").unwrap())
        .collect();
    assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");

    let (base, seen) = recorder(100).await.unwrap();
    let o = run(&base, &["set", log, "A1=1"]).await.unwrap();
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    assert_eq!(seen.lock().unwrap().len(), 7, "the first try and 6 retries");
}

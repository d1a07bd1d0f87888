//! `sheetlog watch` against the local stack (`sheetlog dev` on the emulator, which serves the
//! API, its web page and the local Event API on one port): entries appended by another process
//! are printed as they land, through pokes, and through polling when asked to poll.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

mod common;
use common::DevProcess;

/// A `sheetlog dev` process (no authorization).
struct DevStack(DevProcess);

impl DevStack {
    async fn start(label: &str) -> anyhow::Result<Self> {
        let ready = ("/health", reqwest::StatusCode::OK);
        Ok(Self(DevProcess::start(label, &[], &[], ready).await?))
    }

    /// Runs `sheetlog --api <this stack> ARGS` to the end; its stdout.
    async fn sheetlog(&self, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new(env!("CARGO_BIN_EXE_sheetlog"))
            .args(["--api", &self.0.base])
            .args(args)
            .env_remove("SHEETLOG_TOKEN")
            .output()
            .await?;
        anyhow::ensure!(
            out.status.success(),
            "sheetlog {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8(out.stdout)?.trim().to_owned())
    }

    /// Starts `sheetlog watch ARGS` with its output piped.
    fn watch(&self, args: &[&str]) -> anyhow::Result<Watcher> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sheetlog"))
            .args(["--api", &self.0.base, "watch"])
            .args(args)
            .env_remove("SHEETLOG_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stderr"))?;
        Ok(Watcher {
            child,
            stdout: BufReader::new(stdout).lines(),
            stderr: BufReader::new(stderr).lines(),
        })
    }
}

struct Watcher {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
    stderr: Lines<BufReader<ChildStderr>>,
}

impl Watcher {
    /// The next line on stdout, within `within`.
    async fn line(&mut self, within: Duration) -> anyhow::Result<String> {
        tokio::time::timeout(within, self.stdout.next_line())
            .await
            .map_err(|_| anyhow::anyhow!("watch printed nothing within {within:?}"))??
            .ok_or_else(|| anyhow::anyhow!("watch closed its output"))
    }

    /// Reads stderr until a line containing `needle`; the lines read.
    async fn said(&mut self, needle: &str, within: Duration) -> anyhow::Result<Vec<String>> {
        let mut seen = Vec::new();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let line = tokio::time::timeout_at(deadline, self.stderr.next_line())
                .await
                .map_err(|_| anyhow::anyhow!("watch did not say {needle:?}: {seen:?}"))??
                .ok_or_else(|| anyhow::anyhow!("watch ended: {seen:?}"))?;
            let found = line.contains(needle);
            seen.push(line);
            if found {
                return Ok(seen);
            }
        }
    }

    /// Ctrl-C, as a terminal sends it; the exit status.
    async fn interrupt(mut self) -> anyhow::Result<std::process::ExitStatus> {
        let pid = self
            .child
            .id()
            .ok_or_else(|| anyhow::anyhow!("watch already exited"))?;
        let sent = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .await?;
        anyhow::ensure!(sent.success(), "kill -INT {pid}");
        Ok(tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await??)
    }
}

fn entry(line: &str) -> anyhow::Result<Value> {
    serde_json::from_str(line).map_err(|e| anyhow::anyhow!("not a JSON line ({e}): {line}"))
}

/// With polling set to ten minutes, only a poke can bring the entry within seconds.
#[tokio::test(flavor = "multi_thread")]
async fn watch_prints_entries_as_they_land_through_pokes() -> anyhow::Result<()> {
    let dev = DevStack::start("watch").await?;
    let log = dev.sheetlog(&["logs", "create"]).await?;
    dev.sheetlog(&["set", &log, "A1=before"]).await?;

    let mut w = dev.watch(&[&log, "--json", "--poll-secs", "600"])?;
    w.said("live", Duration::from_secs(30)).await?;
    dev.sheetlog(&["set", &log, "A1=42"]).await?;
    let e = entry(&w.line(Duration::from_secs(10)).await?)?;
    assert_eq!(
        e["seq"], 2,
        "from the head: the earlier entry is not printed: {e}"
    );
    assert_eq!(e["type"], "set", "{e}");
    dev.sheetlog(&["insert-rows", &log, "--at", "1"]).await?;
    let e = entry(&w.line(Duration::from_secs(10)).await?)?;
    assert_eq!(e["seq"], 3, "{e}");
    assert_eq!(e["type"], "insert-rows", "{e}");

    let status = w.interrupt().await?;
    assert!(status.success(), "Ctrl-C ends watch cleanly: {status}");
    Ok(())
}

/// `--from` prints what is already there first; without pokes, polling brings the rest.
#[tokio::test(flavor = "multi_thread")]
async fn watch_polls_when_told_to_and_starts_where_asked() -> anyhow::Result<()> {
    let dev = DevStack::start("watch-poll").await?;
    let log = dev.sheetlog(&["logs", "create"]).await?;
    dev.sheetlog(&["set", &log, "A1=1"]).await?;

    let mut w = dev.watch(&[&log, "--from", "1", "--poll-only", "--poll-secs", "1"])?;
    w.said("polling every 1 s", Duration::from_secs(30)).await?;
    let first = w.line(Duration::from_secs(10)).await?;
    assert!(first.trim_start().starts_with('1'), "{first}");
    dev.sheetlog(&["set", &log, "B1=2"]).await?;
    let second = w.line(Duration::from_secs(10)).await?;
    assert!(second.trim_start().starts_with('2'), "{second}");
    assert!(
        second.contains("B1"),
        "one line says what the entry did: {second}"
    );
    Ok(())
}

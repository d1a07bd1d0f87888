//! `./scripts/bench log --versions-only` (and the full `bench log`): what restoring and comparing
//! versions cost on a million-cell sheet, in memory (the snapshot engine's work; the S3 and
//! DynamoDB round trips of a deployment come on top). `restore_1m_cells_ms`: keeping the state of
//! a version 50 edits after the sheet's snapshot (what `POST /logs/{logId}/restore` does before it
//! appends) and a read through the restore. `diff_1000_cells_ms`: one page of
//! `GET /logs/{logId}/diff` over the whole sheet between two versions 1,000 cells apart.

use std::time::Instant;

use anyhow::{Context, ensure};
use serde::Serialize;
use sheetlog_sheet::entry::EntryBody;
use sheetlog_sheet::event::{Event, Import, ImportFormat, Restore};
use sheetlog_sheet::sample::{SAMPLE_COLS, write_sample_csv};
use sheetlog_sheet::snapshot::diff::{PageLimits, Version, diff_page};
use sheetlog_sheet::snapshot::{
    BlobStore, BuildConfig, LogEntry, Manifest, MemBlobs, MemImports, SnapshotBuilder,
    build_snapshot, read_range, resolve_restores,
};
use sheetlog_sheet::{CellEdit, CellRef, Range, SetCells, Value};
use uuid::Uuid;

const LOG: Uuid = Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0046);
/// Rows of the sample sheet: 100,000 rows of 10 columns, a million cells.
const ROWS: u64 = 100_000;
/// Edits after the snapshot, 10 cells each, spread down the sheet.
const EDITS: u64 = 100;

#[derive(Debug, Serialize)]
pub struct VersionsBench {
    pub versions_sheet_cells: u64,
    pub restore_1m_cells_ms: f64,
    /// Chunks the restore wrote (the rest are the snapshot's own).
    pub restore_1m_chunks_written: u64,
    pub diff_1000_cells_ms: f64,
    pub diff_1000_cells_found: usize,
}

/// The best of three runs of each.
pub async fn run() -> anyhow::Result<VersionsBench> {
    let (store, payloads, snap, entries) = sheet().await?;
    let tail = &entries[1..];
    let (restore_ms, written) = restore(&store, &payloads, &snap, tail).await?;
    let (diff_ms, found) = diff(&store, &payloads, &snap, tail).await?;
    Ok(VersionsBench {
        versions_sheet_cells: snap.cells,
        restore_1m_cells_ms: round(restore_ms),
        restore_1m_chunks_written: written,
        diff_1000_cells_ms: round(diff_ms),
        diff_1000_cells_found: found,
    })
}

/// The million-cell sheet: an import, its snapshot at 1, and [`EDITS`] edits after it.
async fn sheet() -> anyhow::Result<(MemBlobs, MemImports, Manifest, Vec<LogEntry>)> {
    let store = MemBlobs::new();
    let payloads = MemImports::new();
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, ROWS)?;
    payloads.insert("1m.csv", csv);
    let mut entries = vec![LogEntry {
        seq: 0,
        entry: EntryBody::Event(Event::Import(Import {
            format: ImportFormat::Csv,
            group: None,
            layout: None,
        })),
        payload: Some("1m.csv".into()),
    }];
    let snap = build_snapshot(
        &store,
        &payloads,
        BuildConfig::default(),
        LOG,
        1,
        None,
        entries.clone(),
    )
    .await?
    .manifest()?;
    for i in 0..EDITS {
        let cells = (0..10)
            .map(|c| CellEdit {
                at: CellRef {
                    row: (i * (ROWS / EDITS) + c) as u32,
                    col: (c % u64::from(SAMPLE_COLS)) as u32,
                },
                value: Value::Text(format!("edit {i}.{c}")),
                format: None,
            })
            .collect();
        entries.push(LogEntry::event(1 + i, Event::Set(SetCells { cells })));
    }
    Ok((store, payloads, snap, entries))
}

/// Keeps the state of the version halfway through `tail` and reads 1,000 rows through a restore
/// to it: the best time of three, and the chunks the restore wrote.
async fn restore(
    store: &MemBlobs,
    payloads: &MemImports,
    snap: &Manifest,
    tail: &[LogEntry],
) -> anyhow::Result<(f64, u64)> {
    let version = 1 + EDITS / 2;
    let mut best = f64::MAX;
    let mut written = 0;
    for _ in 0..3 {
        let fresh = MemBlobs::new();
        copy(store, &fresh).await?;
        let started = Instant::now();
        let kept = SnapshotBuilder::restore(
            &fresh,
            payloads,
            BuildConfig::default(),
            LOG,
            version,
            Some(snap.clone()),
            tail[..(version - 1) as usize].to_vec(),
        )?
        .run(|_| {})
        .await?;
        let mut after = tail.to_vec();
        after.push(LogEntry {
            seq: 1 + EDITS,
            entry: EntryBody::Event(Event::Restore(Restore {
                seq: version,
                group: None,
            })),
            payload: None,
        });
        let (base, rest) = resolve_restores(&fresh, LOG, Some(snap.clone()), after).await?;
        let range: Range = "A1:J1000".parse().context("range")?;
        let (grid, _) = read_range(&fresh, payloads, LOG, base.as_ref(), &rest, range).await?;
        best = best.min(started.elapsed().as_secs_f64() * 1e3);
        ensure!(grid.len() == 1000 && kept.cells >= ROWS * u64::from(SAMPLE_COLS) - 1000);
        written = kept.stats.chunks_written;
    }
    Ok((best, written))
}

/// One page of the diff between the snapshot and the end: the best time of three, and the
/// changes found.
async fn diff(
    store: &MemBlobs,
    payloads: &MemImports,
    snap: &Manifest,
    tail: &[LogEntry],
) -> anyhow::Result<(f64, usize)> {
    let mut best = f64::MAX;
    let mut found = 0;
    for _ in 0..3 {
        let started = Instant::now();
        let page = diff_page(
            store,
            payloads,
            LOG,
            (
                Version {
                    base: Some(snap),
                    entries: &[],
                },
                Version {
                    base: Some(snap),
                    entries: tail,
                },
            ),
            0,
            PageLimits {
                limit: 1_000,
                max_bytes: 2 * 1024 * 1024,
            },
        )
        .await?;
        best = best.min(started.elapsed().as_secs_f64() * 1e3);
        found = page.changes.len();
        ensure!(
            page.next_row.is_none() && found == (EDITS * 10) as usize,
            "one complete page of every change: {found}, next {:?}",
            page.next_row
        );
    }
    Ok((best, found))
}

/// Every blob of `from` into `to`: each restore run starts from the same stored snapshot.
async fn copy(from: &MemBlobs, to: &MemBlobs) -> anyhow::Result<()> {
    for (k, v) in from.snapshot() {
        to.put(&k, v).await?;
    }
    Ok(())
}

fn round(ms: f64) -> f64 {
    (ms * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every change from `old` to `new`, over the whole sheet, page by page.
    async fn changes(
        store: &MemBlobs,
        payloads: &MemImports,
        old: Version<'_>,
        new: Version<'_>,
    ) -> anyhow::Result<usize> {
        let (mut row, mut found) = (0, 0);
        loop {
            let limits = PageLimits {
                limit: 1_000,
                max_bytes: 2 * 1024 * 1024,
            };
            let page = diff_page(store, payloads, LOG, (old, new), row, limits).await?;
            found += page.changes.len();
            match page.next_row {
                Some(next) => row = next,
                None => return Ok(found),
            }
        }
    }

    /// Keeps the state as of `seq` (as `POST …/restore` does first) and returns the log with the
    /// `restore` entry appended, resolved: the base and entries a read of the sheet now starts from.
    async fn restored(
        store: &MemBlobs,
        payloads: &MemImports,
        snap: &Manifest,
        log: &[LogEntry],
        seq: u64,
    ) -> anyhow::Result<(Vec<LogEntry>, Option<Manifest>, Vec<LogEntry>)> {
        let before: Vec<LogEntry> = log.iter().filter(|e| e.seq < seq).cloned().collect();
        SnapshotBuilder::restore(
            store,
            payloads,
            BuildConfig::default(),
            LOG,
            seq,
            Some(snap.clone()),
            before,
        )?
        .run(|_| {})
        .await?;
        let mut after = log.to_vec();
        after.push(LogEntry {
            seq: 1 + log.last().map_or(0, |e| e.seq),
            entry: EntryBody::Event(Event::Restore(Restore { seq, group: None })),
            payload: None,
        });
        let (base, rest) = resolve_restores(store, LOG, Some(snap.clone()), after.clone()).await?;
        Ok((after, base, rest))
    }

    /// A million-cell version restored equals it at every cell (a diff over the whole sheet finds
    /// nothing, where the version and the sheet before the restore differ by the 500 cells edited
    /// between them), and one restore of the sequence before the restore undoes it.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_million_cell_version_restored_equals_it_and_one_restore_undoes_it()
    -> anyhow::Result<()> {
        let (store, payloads, snap, entries) = sheet().await?;
        let tail = &entries[1..];
        let version = 1 + EDITS / 2;
        let at = |seq: u64| Version {
            base: Some(&snap),
            entries: &tail[..(seq - 1) as usize],
        };
        let head = Version {
            base: Some(&snap),
            entries: tail,
        };
        assert_eq!(changes(&store, &payloads, at(version), head).await?, 500);

        let (log, base, rest) = restored(&store, &payloads, &snap, tail, version).await?;
        let now = Version {
            base: base.as_ref(),
            entries: &rest,
        };
        assert_eq!(
            base.as_ref().map(|b| b.cells),
            Some(ROWS * u64::from(SAMPLE_COLS))
        );
        assert_eq!(
            changes(&store, &payloads, at(version), now).await?,
            0,
            "restored: the version"
        );
        assert_eq!(changes(&store, &payloads, head, now).await?, 500);

        // The undo: restore the sequence of the restore, the sheet just before it.
        let restore_seq = log.last().map_or(0, |e| e.seq);
        let (_, base, rest) = restored(&store, &payloads, &snap, &log, restore_seq).await?;
        let undone = Version {
            base: base.as_ref(),
            entries: &rest,
        };
        assert_eq!(
            changes(&store, &payloads, head, undone).await?,
            0,
            "undone: the sheet before"
        );
        Ok(())
    }
}

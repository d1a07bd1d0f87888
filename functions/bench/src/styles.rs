//! Styled snapshots, for `snapshot`: the 1M-cell sample sheet built in memory as it is, and
//! again with every cell styled by one of ten shared styles (one per column, as a formatted table
//! has: a bold key column, number columns with fills and borders), through 100 `style` entries
//! of 10,000 rows each. The bytes stored and the build rate of both, and their ratio: the
//! styles' cost in snapshot bytes (`styled_snapshot_bytes_ratio`, target ≤ 1.1).

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;
use sheetlog_core::sheet::{CellRef, Event, ImportFormat, Range, StyleCells, StylePatch};
use sheetlog_core::snapshot::{
    BuildConfig, ImportSource, LogEntry, MemBlobs, MemImports, build_snapshot, materialize,
};
use sheetlog_sheet::sample::SAMPLE_COLS;
use uuid::Uuid;

/// The log the sheets are built for (in memory: any id will do).
const LOG: Uuid = Uuid::from_u128(0x5f1e_0000_0000_4000_8000_0000_0000_0001);

/// Rows per `style` entry: 10,000 rows of one column, within the 100,000-cell entry limit.
const BAND_ROWS: u32 = 10_000;

#[derive(Debug, Serialize)]
pub(crate) struct Styled {
    pub styled_sheet_cells: u64,
    pub styled_sheet_styles: u64,
    pub unstyled_snapshot_bytes: u64,
    pub styled_snapshot_bytes: u64,
    pub styled_snapshot_bytes_ratio: f64,
    pub unstyled_build_cells_per_s: f64,
    pub styled_build_cells_per_s: f64,
}

/// The ten styles, one per column of the sample.
fn ten_styles() -> anyhow::Result<Vec<StylePatch>> {
    [
        json!({"bold": true}),
        json!({"italic": true, "color": "#595959"}),
        json!({"hAlign": "right", "format": "#,##0.00"}),
        json!({"fill": "#fff2cc", "hAlign": "right"}),
        json!({"border": {"bottom": {"style": "thin", "color": "#bfbfbf"}}}),
        json!({"fontSize": 10, "vAlign": "middle"}),
        json!({"fill": "#ddebf7", "format": "0%"}),
        json!({"wrap": true}),
        json!({"underline": true, "color": "#0563c1"}),
        json!({"border": {"left": {"style": "thin"}, "right": {"style": "thin"}}, "hAlign": "center"}),
    ]
    .into_iter()
    .map(|v| serde_json::from_value(v).map_err(anyhow::Error::from))
    .collect()
}

/// Builds the sample sheet in `csv` (`rows` lines of [`SAMPLE_COLS`] columns) plain and styled.
pub(crate) async fn styled_bytes(csv: &Path, rows: u32) -> anyhow::Result<Styled> {
    let payloads = MemImports::new();
    payloads.insert("sheet.csv", std::fs::read(csv)?);
    let p: &dyn ImportSource = &payloads;
    let cfg = BuildConfig::default();
    let plain = vec![LogEntry::import(0, ImportFormat::Csv, "sheet.csv")];
    let store = MemBlobs::new();
    let started = Instant::now();
    let built = build_snapshot(&store, p, cfg, LOG, 1, None, plain.clone()).await?;
    let plain_s = started.elapsed().as_secs_f64();
    let unstyled = store.stats().bytes;
    let cells = built.manifest()?.cells;

    let mut entries = plain;
    for (col, style) in ten_styles()?.into_iter().enumerate() {
        let col = col as u32;
        for start in (0..rows).step_by(BAND_ROWS as usize) {
            let end = (start + BAND_ROWS).min(rows) - 1;
            let ranges = vec![Range::new(
                CellRef { row: start, col },
                CellRef { row: end, col },
            )];
            let seq = entries.len() as u64;
            let style = style.clone();
            entries.push(LogEntry::event(
                seq,
                Event::Style(StyleCells { ranges, style }),
            ));
        }
    }
    let seq = entries.len() as u64;
    let store = MemBlobs::new();
    let started = Instant::now();
    let built = build_snapshot(&store, p, cfg, LOG, seq, None, entries).await?;
    let styled_s = started.elapsed().as_secs_f64();
    let styled = store.stats().bytes;
    let manifest = built.manifest()?;
    anyhow::ensure!(
        manifest.cells == cells,
        "the styled sheet has {} cells, the plain one {cells}",
        manifest.cells
    );
    // Every cell carries one of the ten styles.
    let sheet = materialize(&store, &manifest).await?;
    let mut distinct = std::collections::HashSet::new();
    for row in sheet.rows() {
        for (_, cell) in row.cells {
            let style = cell
                .style
                .ok_or_else(|| anyhow::anyhow!("row {} has an unstyled cell", row.index))?;
            distinct.insert((*style).clone());
        }
    }
    anyhow::ensure!(
        distinct.len() == SAMPLE_COLS as usize,
        "{} styles",
        distinct.len()
    );
    Ok(Styled {
        styled_sheet_cells: cells,
        styled_sheet_styles: distinct.len() as u64,
        unstyled_snapshot_bytes: unstyled,
        styled_snapshot_bytes: styled,
        styled_snapshot_bytes_ratio: styled as f64 / unstyled as f64,
        unstyled_build_cells_per_s: cells as f64 / plain_s,
        styled_build_cells_per_s: cells as f64 / styled_s,
    })
}

/// `snapshot --styles-only`: these figures alone, for the 1M-cell sample sheet in `csv`.
pub(crate) fn run(json: bool, csv: &Path) -> anyhow::Result<()> {
    eprintln!(
        "[bench snapshot] the 1M-cell sheet plain and with every cell in one of ten styles (in memory)"
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let f = rt.block_on(styled_bytes(csv, 100_000))?;
    if json {
        println!("{}", serde_json::to_string(&f)?);
    } else {
        println!(
            "{} cells in {} styles: {} bytes stored styled, {} plain, ratio {:.3}; built at {:.0} cells/s styled, {:.0} plain",
            f.styled_sheet_cells,
            f.styled_sheet_styles,
            f.styled_snapshot_bytes,
            f.unstyled_snapshot_bytes,
            f.styled_snapshot_bytes_ratio,
            f.styled_build_cells_per_s,
            f.unstyled_build_cells_per_s
        );
    }
    Ok(())
}

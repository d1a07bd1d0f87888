//! XLSX exports read back with calamine (a reader independent of the writer) and with the
//! importer: values, formulas with their values, number formats, and every cell of a sheet
//! larger than one window, from a snapshot plus the entries after it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Cursor;

use std::ops::ControlFlow;

use calamine::{Data, Reader, Xlsx};

use super::super::diff::Version;
use super::super::tests::{LOG, SMALL, build, replay, rt};
use super::*;
use crate::event::{Event, ImportFormat, InsertRows, RowNumber, SetCells};
use crate::import::{ImportPos, Mode};
use crate::snapshot::{LogEntry, MemBlobs, MemImports, load_manifest};
use crate::test_support::{at, n, text};
use crate::value::Formula;
use crate::{CellEdit, CellRef};

fn edit(a1: &str, value: Value, format: Option<&str>) -> CellEdit {
    CellEdit {
        at: at(a1),
        value,
        format: format.map(Into::into),
    }
}

fn formula(text: &str) -> Value {
    Value::Formula(Formula::new(text).unwrap())
}

async fn export(
    store: &MemBlobs,
    payloads: &MemImports,
    v: Version<'_>,
) -> (ExportStats, Vec<u8>, Vec<(u32, u32)>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.xlsx");
    let mut seen = Vec::new();
    let stats = export_xlsx(
        store,
        payloads,
        LOG,
        v,
        (&path, dir.path()),
        &mut |done, of| {
            seen.push((done, of));
            ControlFlow::Continue(())
        },
    )
    .await
    .unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(stats.bytes, bytes.len() as u64);
    // The writer's temporary files are gone: only the workbook is left.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    (stats, bytes, seen)
}

fn calamine(bytes: &[u8]) -> Xlsx<Cursor<Vec<u8>>> {
    Xlsx::new(Cursor::new(bytes.to_vec())).unwrap()
}

/// The cells the importer reads from `bytes`, by (row, column).
fn imported(bytes: &[u8]) -> Vec<(u32, u32, Cell)> {
    let mut out = Vec::new();
    crate::import::read_rows(
        ImportFormat::Xlsx,
        Box::new(Cursor::new(bytes.to_vec())),
        ImportPos::default(),
        Mode::Strict,
        &mut |row, _| {
            out.extend(row.cells.into_iter().map(|(c, cell)| (row.index, c, cell)));
            Ok(std::ops::ControlFlow::Continue(()))
        },
    )
    .unwrap();
    out
}

#[test]
fn values_formulas_and_formats_read_back_in_another_library() {
    let entries = vec![LogEntry::event(
        0,
        Event::Set(SetCells {
            cells: vec![
                edit("A1", text("name"), None),
                edit("B1", n(0.125), Some("0.00%")),
                edit("C1", Value::Bool(true), None),
                edit("D1", Value::Error(ErrorCode::Div0), None),
                edit("E1", Value::Error(ErrorCode::Circ), None),
                edit("A2", n(2.0), None),
                edit("B2", n(3.5), Some("#,##0.00")),
                edit("C2", formula("A2*B2"), Some("0.0")),
                edit("D2", formula("A1&\"!\""), None),
                edit("E2", formula("1/0"), None),
                edit("F2", Value::Empty, Some("@")),
                edit("A4", text("=not a formula"), None),
            ],
        }),
    )];
    let store = MemBlobs::new();
    let payloads = MemImports::new();
    let v = Version {
        base: None,
        entries: &entries,
    };
    let (stats, bytes, seen) = rt().block_on(export(&store, &payloads, v));
    assert_eq!(
        (stats.rows, stats.columns, stats.cells, stats.formulas),
        (4, 6, 12, 3)
    );
    assert_eq!(seen, vec![(4, 4)]);

    let mut book = calamine(&bytes);
    assert_eq!(book.sheet_names(), vec![SHEET_NAME.to_string()]);
    let values = book.worksheet_range(SHEET_NAME).unwrap();
    let cell = |a1: &str| {
        let r = at(a1);
        values
            .get_value((r.row, r.col))
            .cloned()
            .unwrap_or(Data::Empty)
    };
    assert_eq!(cell("A1"), Data::String("name".into()));
    assert_eq!(cell("B1"), Data::Float(0.125));
    assert_eq!(cell("C1"), Data::Bool(true));
    assert_eq!(cell("D1"), Data::Error(calamine::CellErrorType::Div0));
    assert_eq!(cell("E1"), Data::String("#CIRC!".into()));
    // Formulas carry the values a read shows for them.
    assert_eq!(cell("C2"), Data::Float(7.0));
    assert_eq!(cell("D2"), Data::String("name!".into()));
    assert_eq!(cell("E2"), Data::Error(calamine::CellErrorType::Div0));
    assert_eq!(cell("A4"), Data::String("=not a formula".into()));
    let formulas = book.worksheet_formula(SHEET_NAME).unwrap();
    let f = |a1: &str| {
        let r = at(a1);
        formulas
            .get_value((r.row, r.col))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(f("C2"), "A2*B2");
    assert_eq!(f("D2"), "A1&\"!\"");
    assert_eq!(f("A4"), "");

    // The importer takes back every cell as it was, number formats included.
    let back = imported(&bytes);
    let get = |a1: &str| {
        let r = at(a1);
        back.iter()
            .find(|(row, col, _)| (*row, *col) == (r.row, r.col))
            .map(|(_, _, c)| c.clone())
    };
    assert_eq!(get("B1").unwrap().format.as_deref(), Some("0.00%"));
    assert_eq!(get("B2").unwrap().format.as_deref(), Some("#,##0.00"));
    assert_eq!(get("B2").unwrap().value, n(3.5));
    assert_eq!(get("A4").unwrap().value, text("=not a formula"));
    let c2 = get("C2").unwrap();
    assert_eq!(c2.format.as_deref(), Some("0.0"));
    match c2.value {
        Value::Formula(f) => {
            assert_eq!(&*f.text, "A2*B2");
            assert_eq!(f.cached.as_deref(), Some(&n(7.0)));
        }
        other => panic!("C2 came back as {other:?}"),
    }
}

/// Styled cells (ten shared styles over ranges, empty cells among them, number formats set by a
/// style) export as workbook formats, and both the importer and a snapshot built from importing
/// the file give back every cell with its value, format and style.
#[test]
fn styles_read_back_from_the_workbook_and_survive_a_snapshot_of_its_import() {
    rt().block_on(async {
        let mut entries = vec![LogEntry::event(
            0,
            Event::Set(SetCells {
                cells: (0..30)
                    .flat_map(|r| {
                        (0..4).map(move |c| CellEdit {
                            at: CellRef { row: r, col: c },
                            value: n(f64::from(r * 4 + c)),
                            format: None,
                        })
                    })
                    .collect(),
            }),
        )];
        for (i, style) in crate::style::tests::ten_patches().into_iter().enumerate() {
            let r = i as u32 * 3;
            entries.push(LogEntry::event(
                entries.len() as u64,
                Event::Style(crate::event::StyleCells {
                    // Two columns of values and one past them, empty until styled.
                    ranges: vec![crate::Range::new(
                        CellRef { row: r, col: 2 },
                        CellRef { row: r + 4, col: 4 },
                    )],
                    style,
                }),
            ));
        }
        let seq = entries.len() as u64;
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let v = Version {
            base: None,
            entries: &entries,
        };
        let (_, bytes, _) = export(&store, &payloads, v).await;
        let want = replay(&entries, seq, &payloads);
        let styled = want
            .rows()
            .flat_map(|r| r.cells)
            .filter(|(_, c)| c.style.is_some())
            .count();
        assert!(styled > 60, "{styled} styled cells");
        let back = imported(&bytes);
        let missing: Vec<String> = want
            .rows()
            .flat_map(|r| {
                let index = r.index;
                r.cells.into_iter().map(move |(c, cell)| (index, c, cell))
            })
            .filter(|(r, c, _)| !back.iter().any(|(br, bc, _)| (br, bc) == (r, c)))
            .map(|(row, col, cell)| format!("{} {cell:?}", CellRef { row, col }))
            .collect();
        assert_eq!(missing, Vec::<String>::new());
        for (row, col, cell) in &back {
            let at = CellRef {
                row: *row,
                col: *col,
            };
            assert_eq!(Some(cell), want.get(at), "{at}");
        }
        // The same file as an import entry, built into a snapshot: styled rows come from the
        // reader thread encoded on their own, and the chunks keep them.
        payloads.insert("book", bytes);
        let import = vec![LogEntry::import(0, ImportFormat::Xlsx, "book")];
        build(&store, &payloads, SMALL, 1, None, &import).await;
        let m = load_manifest(&store, LOG, 1).await.unwrap().unwrap();
        assert!(m.chunks.len() > 3, "{} chunks", m.chunks.len());
        let sheet = crate::snapshot::materialize(&store, &m).await.unwrap();
        assert_eq!(sheet, want);
    });
}

/// A sheet of several windows, read from a snapshot plus the entries after it (a row inserted
/// near the top, a cell set), equals the replayed sheet at every cell.
#[test]
fn a_sheet_of_many_windows_exports_every_cell_of_its_version() {
    rt().block_on(async {
        let payloads = MemImports::new();
        let mut csv = Vec::new();
        crate::sample::write_sample_csv(&mut csv, 12_000).unwrap();
        payloads.insert("p", csv);
        let mut entries = vec![LogEntry::import(0, ImportFormat::Csv, "p")];
        let store = MemBlobs::new();
        build(&store, &payloads, SMALL, 1, None, &entries).await;
        let base = load_manifest(&store, LOG, 1).await.unwrap().unwrap();
        entries.push(LogEntry::event(
            1,
            Event::InsertRows(InsertRows {
                at: RowNumber(2),
                count: 1,
                values: vec![vec![text("inserted")]],
            }),
        ));
        entries.push(LogEntry::event(
            2,
            Event::Set(SetCells {
                cells: vec![edit("J12001", n(42.0), Some("0.0"))],
            }),
        ));
        let v = Version {
            base: Some(&base),
            entries: &entries[1..],
        };
        let (stats, bytes, seen) = export(&store, &payloads, v).await;
        let want = replay(&entries, 3, &payloads);
        assert_eq!(stats.rows, 12_001);
        assert_eq!(stats.cells, want.cell_count() as u64);
        // 10 columns: windows of 10,000 rows.
        assert_eq!(seen, vec![(10_000, 12_001), (12_001, 12_001)]);
        let back = imported(&bytes);
        assert_eq!(back.len(), want.cell_count());
        for (row, col, cell) in back {
            let expected = want.get(CellRef { row, col }).unwrap();
            assert_eq!(&cell, expected, "{}", CellRef { row, col });
        }
    });
}

/// The worksheet's XML in `bytes` (a reader independent of the writer for what calamine does
/// not read: widths, heights, panes).
fn sheet_xml(bytes: &[u8]) -> String {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes.to_vec())).unwrap();
    let mut xml = String::new();
    zip.by_name("xl/worksheets/sheet1.xml")
        .unwrap()
        .read_to_string(&mut xml)
        .unwrap();
    xml
}

/// Column widths and the split from the snapshot, a row height from an entry after it: the
/// workbook has them, and its cells are where they were.
#[test]
fn widths_heights_and_frozen_panes_are_in_the_workbook() {
    rt().block_on(async {
        let payloads = MemImports::new();
        let json = |v: serde_json::Value| Event::from_json(v.to_string().as_bytes()).unwrap();
        let mut entries = vec![
            LogEntry::event(
                0,
                Event::Set(SetCells {
                    cells: vec![edit("A1", n(1.0), None), edit("E9", text("end"), None)],
                }),
            ),
            LogEntry::event(
                1,
                json(serde_json::json!({"type": "resize-columns", "body": {"at": "B", "count": 2, "width": 120}})),
            ),
            LogEntry::event(
                2,
                json(serde_json::json!({"type": "freeze", "body": {"rows": 2, "columns": 1}})),
            ),
        ];
        let store = MemBlobs::new();
        build(&store, &payloads, SMALL, 3, None, &entries).await;
        let base = load_manifest(&store, LOG, 3).await.unwrap().unwrap();
        assert_eq!(base.layout.columns.get(2), Some(120), "the manifest keeps the layout");
        entries.push(LogEntry::event(
            3,
            json(serde_json::json!({"type": "resize-rows", "body": {"at": 3, "count": 1, "height": 40}})),
        ));
        let v = Version {
            base: Some(&base),
            entries: &entries[3..],
        };
        let (_, bytes, _) = export(&store, &payloads, v).await;
        let xml = sheet_xml(&bytes);
        // B and C, one `col` element for the two (120 pixels are 17.14 characters).
        assert!(
            xml.contains("<col min=\"2\" max=\"3\" width=\"17.140625\" customWidth=\"1\"/>"),
            "{xml}"
        );
        assert_eq!(xml.matches("<col ").count(), 1, "{xml}");
        // 40 pixels are 30 points.
        assert!(xml.contains("<row r=\"3\" ht=\"30\" customHeight=\"1\""), "{xml}");
        assert!(
            xml.contains("<pane xSplit=\"1\" ySplit=\"2\" topLeftCell=\"B3\""),
            "{xml}"
        );
        let back = imported(&bytes);
        assert_eq!(back.len(), 2);
        // And an import of the workbook reads the same layout back (xlsx_layout.rs).
        let layout = crate::import::layout_of(ImportFormat::Xlsx, Cursor::new(bytes))
            .unwrap()
            .expect("a layout");
        assert_eq!(
            crate::layout::Layout::from_runs(&layout),
            crate::snapshot::layout_at(Some(&base), &entries[3..])
        );
    });
}

#[test]
fn an_empty_sheet_is_a_workbook_of_one_empty_worksheet() {
    let store = MemBlobs::new();
    let payloads = MemImports::new();
    let v = Version {
        base: None,
        entries: &[],
    };
    let (stats, bytes, seen) = rt().block_on(export(&store, &payloads, v));
    assert_eq!((stats.rows, stats.cells), (0, 0));
    assert!(seen.is_empty());
    let mut book = calamine(&bytes);
    assert!(book.worksheet_range(SHEET_NAME).unwrap().is_empty());
}

/// The sheet of `entries` alone (no snapshot) exported to `path`, its temporary files in `tmp`.
fn export_entries(
    entries: &[LogEntry],
    (path, tmp): (&std::path::Path, &std::path::Path),
    progress: &mut (dyn FnMut(u32, u32) -> ControlFlow<()> + Send),
) -> Result<ExportStats, ExportError> {
    let v = Version {
        base: None,
        entries,
    };
    rt().block_on(export_xlsx(
        &MemBlobs::new(),
        &MemImports::new(),
        LOG,
        v,
        (path, tmp),
        progress,
    ))
}

#[test]
fn a_temporary_directory_that_cannot_be_written_is_an_error_not_a_panic() {
    let entries = vec![LogEntry::event(
        0,
        Event::Set(SetCells {
            cells: vec![edit("A1", n(1.0), None)],
        }),
    )];
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir");
    let err = export_entries(
        &entries,
        (&dir.path().join("out.xlsx"), &missing),
        &mut |_, _| ControlFlow::Continue(()),
    )
    .unwrap_err();
    assert!(matches!(err, ExportError::Write(_)), "{err:?}");
}

#[test]
fn a_progress_that_stops_leaves_an_error_naming_how_far_it_got_and_no_file() {
    // Two columns: windows of 50,000 rows, so 60,000 rows take two.
    let entries = vec![LogEntry::event(
        0,
        Event::Set(SetCells {
            cells: (0..60_000)
                .flat_map(|row| {
                    (0..2).map(move |col| CellEdit {
                        at: CellRef { row, col },
                        value: n(f64::from(row)),
                        format: None,
                    })
                })
                .collect(),
        }),
    )];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.xlsx");
    let err = export_entries(&entries, (&path, dir.path()), &mut |_, _| {
        ControlFlow::Break(())
    })
    .unwrap_err();
    assert!(
        matches!(
            err,
            ExportError::Stopped {
                rows_done: 50_000,
                rows: 60_000
            }
        ),
        "{err:?}"
    );
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

//! The limits every sheet and every event is checked against. They are Excel's, so anything a user
//! builds here can be exported to Excel and anything Excel opens can be imported (docs/sheet-model.md).

/// Rows in a sheet (Excel: 1,048,576). Row numbers in A1 references run `1..=MAX_ROWS`.
pub const MAX_ROWS: u32 = 1_048_576;
/// Columns in a sheet (Excel: 16,384, `A..=XFD`).
pub const MAX_COLS: u32 = 16_384;
/// Characters (Unicode scalar values) in one cell's text (Excel: 32,767).
pub const MAX_TEXT_CHARS: usize = 32_767;
/// Bytes in one number-format string (Excel allows 255 characters; we count bytes so the check is
/// cheap and the bound on stored size is exact).
pub const MAX_FORMAT_BYTES: usize = 255;
/// Cells in one `set` event. An entry body is at most 1 MB (the API's limit), and a cell costs at
/// least a few bytes, so this bound is never the binding one for a valid entry; it keeps a corrupt
/// or hostile binary body from asking for an absurd allocation.
pub const MAX_CELLS_PER_SET: usize = 1_000_000;
/// Cells the ranges of one `style` event cover. A style makes a cell of each empty place it
/// covers, and a snapshot build holds the rows a style makes below a row it has not reached yet
/// (up to all of them at the end of the sheet), so this bounds that memory as the 1 MB entry
/// limit bounds a `set`'s (about 100,000 cells): some 12 MB.
pub const MAX_CELLS_PER_STYLE: u64 = 100_000;

/// Bytes in one CSV record (a line, or several when a quoted field spans lines). The widest valid
/// row of plain values is far below this; the bound keeps one endless line from holding the
/// whole file in memory while it is parsed (docs/api.md, "Upload limits").
pub const MAX_CSV_RECORD_BYTES: u64 = 4 * 1024 * 1024;
/// Decompressed bytes of any one XLSX part that is read into memory whole: the shared-strings
/// table, styles, the workbook. (Worksheets are streamed, cell by cell.)
pub const MAX_XLSX_PART_BYTES: u64 = 64 * 1024 * 1024;
/// Decompressed bytes of a whole XLSX file, all parts together.
pub const MAX_XLSX_UNCOMPRESSED_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Decompressed ÷ compressed size of one XLSX part, checked once the part has produced more than
/// a mebibyte. Spreadsheet XML deflates about 5 to 30 times; a zip bomb deflates about a thousand.
pub const MAX_XLSX_COMPRESSION_RATIO: u64 = 200;

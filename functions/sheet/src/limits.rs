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

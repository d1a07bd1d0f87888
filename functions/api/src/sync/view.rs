//! A pull's patch: what changed between the cookie and the head, or a full reset.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};
use sheetlog_core::LogError;
use sheetlog_core::domain::LogId;
use sheetlog_core::log::{EntriesPage, SegmentHint};
use sheetlog_core::sheet::limits::{MAX_COLS, MAX_ROWS};
use sheetlog_core::sheet::{CellRef, EntryBody, Event, Range, Row, Value as SheetValue};
use sheetlog_core::snapshot::ReadBudget;
use tracing::warn;

use crate::cells::{Bounded, rows_at};
use crate::error::ApiError;
use crate::request::ApiResult;
use crate::state::SharedState;

/// A `put` of a cell is at least this many bytes of JSON, which bounds the cells worth reading.
const MIN_PUT_BYTES: usize = 40;
/// Past this many entries since the cookie, a full reset is cheaper than reading them.
const MAX_INCREMENTAL_ENTRIES: u64 = 5_000;
/// The most cells a `style` may cover and still be pulled as the cells it touched.
const STYLE_CELLS_TOUCHED: u64 = 5_000;
/// The most cells the events of a `view=none` pull's `meta/changed` may touch, and the most
/// bytes of JSON they may take; past either, the key says only that the view changed.
const CHANGED_MAX_CELLS: u64 = 1_000;
const CHANGED_MAX_BYTES: usize = 64 * 1024;

/// A pull's answer before it is serialised.
pub(super) struct View {
    pub(super) patch: Vec<Value>,
    pub(super) last_ids: BTreeMap<String, u64>,
}

/// What the entries since the cookie changed, as far as a patch can say it.
#[derive(Default)]
struct Changes {
    /// The cells they set; `None` when the patch is a full reset.
    touched: Option<BTreeSet<CellRef>>,
    /// The group's clients they advanced, and each one's last mutation id.
    last_ids: BTreeMap<String, u64>,
    /// Their row and column changes as `move/` puts (a `view=none` pull only).
    moves: Vec<Value>,
    /// For a `view=none` pull: the events, in order, when they only set and style cells (no
    /// formulas, at most [`CHANGED_MAX_CELLS`]) — what `meta/changed` carries.
    events: Option<Vec<Value>>,
}

/// What changed between the cookie and `next_seq`, as a patch and the group's clients whose last
/// mutation id moved.
pub(super) async fn view(
    state: &SharedState,
    // The log, as named in the request, and the segment its head check found (the entries
    // since the cookie are read from there, without a Segment table read).
    (log, log_id, at): (LogId, &str, SegmentHint),
    group: &str,
    // The cookie, and the entries since it when the pull has read them already.
    (cookie, since): (Option<u64>, Option<Arc<EntriesPage>>),
    next_seq: u64,
    with_cells: bool,
) -> ApiResult<View> {
    if cookie == Some(next_seq) {
        return Ok(View {
            patch: Vec::new(),
            last_ids: BTreeMap::new(),
        });
    }
    let mut changes = match cookie.filter(|c| next_seq - c <= MAX_INCREMENTAL_ENTRIES) {
        Some(c) => {
            let read = (log, log_id, at);
            since_cookie(state, read, group, (c, since), next_seq, with_cells).await?
        }
        None => Changes::default(),
    };
    if changes.touched.is_none() {
        // A full reset: every client of the group, as of this view.
        changes.last_ids = state
            .log
            .group_last_mutations_before(log, group, next_seq)
            .await
            .map_err(|e| ApiError::from_log(log_id, e))?
            .into_iter()
            .collect();
    }
    let range = match &changes.touched {
        Some(cells) if cells.is_empty() => None,
        Some(cells) => Some(bounding_range(cells)),
        None => Some(Range {
            start: CellRef { row: 0, col: 0 },
            end: CellRef {
                row: MAX_ROWS - 1,
                col: MAX_COLS - 1,
            },
        }),
    };
    let rows = match range {
        Some(range) if with_cells => read_at(state, log, log_id, next_seq, range).await?,
        _ => Vec::new(),
    };
    let mut patch = patch(
        changes.touched.as_ref(),
        changes.moves,
        rows,
        next_seq,
        with_cells,
    );
    if !with_cells {
        // What moved the client from its cookie to this view, for a client that shows the view
        // by patching what it read at the cookie instead of reading it again (docs/sync.md).
        let events = changes.events.map_or(Value::Null, Value::Array);
        patch.push(json!({"op": "put", "key": "meta/changed",
            "value": {"from": cookie, "to": next_seq, "events": events}}));
    }
    Ok(View {
        patch,
        last_ids: changes.last_ids,
    })
}

/// The entries since cookie `c` (those the pull read already, or read now), as [`Changes`]; a
/// full reset when they cannot be read whole.
async fn since_cookie(
    state: &SharedState,
    (log, log_id, at): (LogId, &str, SegmentHint),
    group: &str,
    (c, since): (u64, Option<Arc<EntriesPage>>),
    next_seq: u64,
    with_cells: bool,
) -> ApiResult<Changes> {
    let page = match since {
        Some(page) => Ok(page),
        None => state
            .log
            .read_since_at(log, c, (next_seq - c) as usize, Some(at))
            .await
            .map(Arc::new),
    };
    match page {
        // An eventually consistent read may not show the newest entries yet: a patch from it
        // would miss their cells while the cookie moved past them. Reset instead (its reads
        // check their counts).
        Ok(page)
            if page.entries.iter().filter(|e| e.seq < next_seq).count() as u64 != next_seq - c =>
        {
            warn!(log = %log, cookie = c, next_seq, got = page.entries.len(), "short read since the cookie; full reset");
            Ok(Changes::default())
        }
        Ok(page) => changes_in(state, log, group, &page, next_seq, with_cells),
        // Too far behind for the retained segments: a full reset.
        Err(LogError::ReloadRequired { .. }) => Ok(Changes::default()),
        Err(e) => Err(ApiError::from_log(log_id, e)),
    }
}

/// The entries of `page` before `next_seq`: which cells they set, whether they moved cells around,
/// and the group's clients they advanced.
fn changes_in(
    state: &SharedState,
    log: LogId,
    group: &str,
    page: &EntriesPage,
    next_seq: u64,
    with_cells: bool,
) -> ApiResult<Changes> {
    let mut changes = Changes::default();
    let mut cells = BTreeSet::new();
    let mut reset = false;
    let mut carried = (!with_cells).then(Carried::default);
    for e in page.entries.iter().filter(|e| e.seq < next_seq) {
        let body = EntryBody::decode(e.kind.0, e.version, &e.body)
            .map_err(|err| ApiError::Internal(format!("entry {} does not decode: {err}", e.seq)))?;
        for m in body.runs() {
            // Every client's group, learnt as its runs go by: a queued push of a client past its
            // first mutation then needs no read to check it, even before its range item is
            // written (`docs/sync.md`).
            if m.first == 1 {
                state.remember_client_group(log, &m.client, &m.group);
            }
            if m.group == group {
                let last = changes.last_ids.entry(m.client.clone()).or_insert(0);
                *last = m.last.max(*last);
            }
        }
        for ev in body.events() {
            if let Some(c) = &mut carried
                && !c.add(ev)
            {
                carried = None;
            }
            match ev {
                Event::Set(s) => cells.extend(s.cells.iter().map(|c| c.at)),
                // A style touches every cell of its ranges; past a few thousand, resending the
                // view costs less than naming them.
                Event::Style(st) if st.cell_count() <= STYLE_CELLS_TOUCHED => {
                    for r in &st.ranges {
                        for row in r.start.row..=r.end.row {
                            cells.extend((r.start.col..=r.end.col).map(|col| CellRef { row, col }));
                        }
                    }
                }
                // The layout leaves every cell as it was.
                Event::ResizeColumns(_) | Event::ResizeRows(_) | Event::Freeze(_) => {}
                _ => reset = true,
            }
        }
        if !with_cells {
            changes.moves.extend(move_puts(e.seq, &body));
        }
    }
    // Without cells there is nothing to reset: the store holds no cells, and the row and column
    // changes travel as `move/` keys instead.
    if !reset || !with_cells {
        changes.touched = Some(cells);
    }
    changes.events = carried.map(|c| c.events);
    Ok(changes)
}

/// The events of a `meta/changed` as they are gathered.
#[derive(Default)]
struct Carried {
    events: Vec<Value>,
    cells: u64,
    bytes: usize,
}

impl Carried {
    /// Adds `ev`; false when it cannot be carried (it moves cells, sets a formula, or the
    /// events pass the limits), and the client reads the view instead.
    fn add(&mut self, ev: &Event) -> bool {
        self.cells += match ev {
            Event::Set(s)
                if s.cells
                    .iter()
                    .any(|c| matches!(c.value, SheetValue::Formula(_))) =>
            {
                return false;
            }
            Event::Set(s) => s.cells.len() as u64,
            Event::Style(st) => st.cell_count(),
            // Listed (a client may keep a layout), but no cell changes.
            Event::ResizeColumns(_) | Event::ResizeRows(_) | Event::Freeze(_) => 0,
            _ => return false,
        };
        let Ok(v) = serde_json::to_value(ev) else {
            return false;
        };
        self.bytes += v.to_string().len();
        self.events.push(v);
        self.cells <= CHANGED_MAX_CELLS && self.bytes <= CHANGED_MAX_BYTES
    }
}

/// The patch: `clear` for a full reset, a `put` per cell read (only those touched, when not a
/// reset), a `del` per touched cell now empty, the `move/` puts, and `meta/seq`.
fn patch(
    touched: Option<&BTreeSet<CellRef>>,
    moves: Vec<Value>,
    rows: Vec<Row>,
    next_seq: u64,
    with_cells: bool,
) -> Vec<Value> {
    let mut patch = Vec::new();
    let mut present = BTreeSet::new();
    if touched.is_none() {
        patch.push(json!({"op": "clear"}));
    }
    for row in rows {
        for (col, cell) in row.cells {
            let at = CellRef {
                row: row.index,
                col,
            };
            if touched.is_some_and(|t| !t.contains(&at)) {
                continue;
            }
            present.insert(at);
            let value = crate::entry_json::cell_json(&cell);
            patch.push(json!({"op": "put", "key": format!("cell/{at}"), "value": value}));
        }
    }
    if let Some(cells) = touched.filter(|_| with_cells) {
        for at in cells.difference(&present) {
            patch.push(json!({"op": "del", "key": format!("cell/{at}")}));
        }
    }
    if touched.is_some() {
        patch.extend(moves);
    }
    patch.push(json!({"op": "put", "key": "meta/seq", "value": next_seq}));
    patch
}

/// The row and column changes of one entry as `move/<seq>/<n>` puts, for a `view=none` client
/// to rebase its pending cell edits the way the server will (`docs/web.md`): each holds the
/// change as applied and, for a client's mutation, its `client` and `id` and, when rebasing
/// changed it, `seen` (as sent). A mutation that only set cells moves nothing and is left out.
fn move_puts(seq: u64, body: &EntryBody) -> Vec<Value> {
    let mut out = Vec::new();
    let mut put = |value: Value| {
        let key = format!("move/{seq:012}/{:05}", out.len());
        out.push(json!({"op": "put", "key": key, "value": value}));
    };
    match body {
        EntryBody::Event(_) | EntryBody::Undo(_) | EntryBody::Authored(_) => {
            for m in body.events().filter_map(shape_json) {
                put(json!({"seq": seq, "applied": [m]}));
            }
        }
        EntryBody::Mutations(_) | EntryBody::Batch(_) => {
            for run in body.runs() {
                for (id, events, sent) in run.by_id() {
                    let done: Vec<Value> = events.into_iter().filter_map(shape_json).collect();
                    let sent = sent.and_then(shape_json);
                    if done.is_empty() && sent.is_none() {
                        continue;
                    }
                    let mut v =
                        json!({"seq": seq, "client": run.client, "id": id, "applied": done});
                    if let Some(sent) = sent {
                        v["seen"] = json!([sent]);
                    }
                    put(v);
                }
            }
        }
        EntryBody::Snapshot | EntryBody::EndSegment => {}
    }
    out
}

/// A row or column change as the web client's overlay holds it (`ShapeOp` in `web/src/model.ts`,
/// 0-based `at`); an import or a restore is `{"op": "replace"}`.
fn shape_json(event: &Event) -> Option<Value> {
    let (axis, op, at, count) = match event {
        Event::Set(_)
        | Event::Style(_)
        | Event::ResizeColumns(_)
        | Event::ResizeRows(_)
        | Event::Freeze(_) => return None,
        Event::Import(_) | Event::Restore(_) => return Some(json!({"op": "replace"})),
        Event::InsertRows(e) => ("rows", "insert", e.at.0, e.count),
        Event::DeleteRows(e) => ("rows", "delete", e.at.0, e.count),
        Event::InsertColumns(e) => ("columns", "insert", e.at.0, e.count),
        Event::DeleteColumns(e) => ("columns", "delete", e.at.0, e.count),
    };
    Some(json!({"axis": axis, "op": op, "at": at, "count": count}))
}

fn bounding_range(cells: &BTreeSet<CellRef>) -> Range {
    let (mut r0, mut c0, mut r1, mut c1) = (u32::MAX, u32::MAX, 0, 0);
    for c in cells {
        r0 = r0.min(c.row);
        r1 = r1.max(c.row);
        c0 = c0.min(c.col);
        c1 = c1.max(c.col);
    }
    Range {
        start: CellRef { row: r0, col: c0 },
        end: CellRef { row: r1, col: c1 },
    }
}

/// The non-empty cells of `range` as of `seq`, bounded by what fits in one response.
async fn read_at(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    seq: u64,
    range: Range,
) -> ApiResult<Vec<Row>> {
    let limit = state.cfg.max_response_bytes;
    let budget = ReadBudget {
        cells: limit / MIN_PUT_BYTES,
        bytes: limit,
    };
    match rows_at(state, log, log_id, seq, range, budget).await? {
        Bounded::Rows(rows) => Ok(rows),
        Bounded::OverBudget { cells, bytes } => Err(ApiError::ViewTooLarge {
            size: bytes.max(cells * MIN_PUT_BYTES),
            limit,
        }),
    }
}

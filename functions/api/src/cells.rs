//! `GET /logs/{logId}/cells`: the values of a range as of a sequence, by replaying the log from
//! its start. (Reading from snapshots replaces the replay once the snapshot pipeline runs.)

use std::io::Cursor;

use serde_json::Value;
use sheetlog_core::LogId;
use sheetlog_core::ports::PayloadStore;
use sheetlog_core::sheet::event::Entry as SheetEntry;
use sheetlog_core::sheet::{Range, Sheet};

use crate::dto::CellsResponse;
use crate::error::ApiError;
use crate::state::SharedState;

/// Largest range one request may read.
pub const MAX_RANGE_CELLS: u64 = 100_000;

pub async fn read(
    state: &SharedState,
    log: LogId,
    log_id: &str,
    raw_range: &str,
    at: Option<u64>,
) -> Result<CellsResponse, ApiError> {
    let range: Range = raw_range
        .parse()
        .map_err(|e| ApiError::InvalidQuery(format!("range={raw_range:?}: {e}")))?;
    let cells = u64::from(range.rows()) * u64::from(range.cols());
    if cells > MAX_RANGE_CELLS {
        return Err(ApiError::InvalidQuery(format!(
            "range {raw_range} holds {cells} cells; at most {MAX_RANGE_CELLS} per request"
        )));
    }
    let mut sheet = Sheet::new();
    let mut next = 0u64;
    let as_of = loop {
        let page = state
            .log
            .read_since(log, next, 1000)
            .await
            .map_err(|e| ApiError::from_log(log_id, e))?;
        for e in &page.entries {
            if at.is_some_and(|at| e.seq >= at) {
                break;
            }
            let SheetEntry::Event(event) = SheetEntry::decode(e.kind.0, e.version, &e.body)
                .map_err(|err| ApiError::Internal(format!("sequence {}: {err}", e.seq)))?
            else {
                continue;
            };
            let payload =
                match &e.payload {
                    Some(key) => {
                        let bytes =
                            state.log.payloads().get(key).await.map_err(|err| {
                                ApiError::Internal(format!("payload {key}: {err}"))
                            })?;
                        Some(Box::new(Cursor::new(bytes))
                            as Box<dyn sheetlog_core::sheet::import::ReadSeek>)
                    }
                    None => None,
                };
            sheet
                .apply(&event, payload)
                .map_err(|err| ApiError::Internal(format!("applying sequence {}: {err}", e.seq)))?;
        }
        next = page.next_seq;
        match at {
            Some(at) if next >= at => break at,
            _ if page.complete => match at {
                Some(at) if at > next => {
                    return Err(ApiError::OutOfRange {
                        from: at,
                        next_seq: next,
                    });
                }
                Some(at) => break at,
                None => break next,
            },
            _ => {}
        }
    };
    let values = sheet
        .read_range(range)
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|v| serde_json::to_value(v).unwrap_or(Value::Null))
                .collect()
        })
        .collect();
    Ok(CellsResponse {
        seq: as_of,
        range: raw_range.to_owned(),
        values,
    })
}

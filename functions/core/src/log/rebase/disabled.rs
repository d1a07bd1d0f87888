//! Without the sheet model (`engine` feature) there is no rebasing append; these uninhabited
//! stand-ins let the append loop compile unchanged.

use crate::domain::{LogId, NewEntry, RequestUnits};
use crate::error::LogError;
use crate::log::EventLog;
use crate::ports::{LogEntries, PayloadStore};

pub(in crate::log) enum Rebasing {}

// Matched by the append loop, never built here: `Rebasing` has no values.
#[allow(dead_code)]
pub(in crate::log) enum CaughtUp {
    Yes,
    NotVisible,
}

impl Rebasing {
    pub(in crate::log) fn base(&self) -> u64 {
        match *self {}
    }

    pub(in crate::log) fn entry(&self) -> NewEntry {
        match *self {}
    }

    pub(in crate::log) async fn catch_up<S: LogEntries, P: PayloadStore>(
        &mut self,
        _log: &EventLog<S, P>,
        _id: LogId,
        _next_seq: u64,
        _units: &mut RequestUnits,
    ) -> Result<CaughtUp, LogError> {
        match *self {}
    }
}

//! DynamoDB request units, computed from AWS's published rules rather than read back from the
//! service (the emulator does not report them, and computing them lets a benchmark state what an
//! operation costs in production):
//! - a write unit covers 1 KB of item, rounded up per item; a transactional write costs double;
//!   a conditional write that fails is still charged;
//! - a read unit covers 4 KB, with the sizes of every item a Query or BatchGet touches added
//!   together before rounding up; eventually consistent reads cost half, transactional double.

use std::ops::{Add, AddAssign};

use serde::Serialize;

/// Read and write request units consumed by an operation (equal to capacity units in provisioned
/// mode). Reads can be fractional because eventually consistent reads cost half.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RequestUnits {
    pub read: f64,
    pub write: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadConsistency {
    Eventual,
    Strong,
    Transactional,
}

const WRITE_UNIT_BYTES: u64 = 1024;
const READ_UNIT_BYTES: u64 = 4096;

/// Write units for writing one item of `item_bytes` (the larger of the old and new item for
/// an overwrite, per AWS).
pub fn write_units(item_bytes: u64, transactional: bool) -> f64 {
    let units = item_bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as f64;
    if transactional { units * 2.0 } else { units }
}

/// Read units for one read request that touched items totalling `total_bytes`. A request that
/// matches nothing is still charged the minimum of one unit (half for eventual consistency).
pub fn read_units(total_bytes: u64, consistency: ReadConsistency) -> f64 {
    let units = total_bytes.div_ceil(READ_UNIT_BYTES).max(1) as f64;
    match consistency {
        ReadConsistency::Eventual => units / 2.0,
        ReadConsistency::Strong => units,
        ReadConsistency::Transactional => units * 2.0,
    }
}

impl RequestUnits {
    pub fn reads(read: f64) -> Self {
        Self { read, write: 0.0 }
    }
    pub fn writes(write: f64) -> Self {
        Self { read: 0.0, write }
    }
}

impl Add for RequestUnits {
    type Output = RequestUnits;
    fn add(self, rhs: Self) -> Self {
        Self {
            read: self.read + rhs.read,
            write: self.write + rhs.write,
        }
    }
}

impl AddAssign for RequestUnits {
    fn add_assign(&mut self, rhs: Self) {
        *self = *self + rhs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_round_up_per_kilobyte_and_double_in_transactions() {
        assert_eq!(write_units(1, false), 1.0);
        assert_eq!(write_units(1024, false), 1.0);
        assert_eq!(write_units(1025, false), 2.0);
        assert_eq!(write_units(500, true), 2.0);
    }

    #[test]
    fn reads_sum_then_round_to_four_kilobytes_and_halve_when_eventual() {
        assert_eq!(read_units(0, ReadConsistency::Eventual), 0.5);
        assert_eq!(read_units(4096, ReadConsistency::Strong), 1.0);
        assert_eq!(read_units(4097, ReadConsistency::Eventual), 1.0);
        assert_eq!(read_units(100, ReadConsistency::Transactional), 2.0);
    }
}

pub mod sheet;
pub mod snapshot;

//! Rebasing an edit made against an older view (`baseSeq`; `docs/sync.md`, "Edits made against
//! an older view"): the entries committed since the view's base are read and the edit is moved
//! through them with the sheet model's rules ([`crate::sheet::rebase`]) before it is written.
//!
//! Layout:
//! - `append.rs`   — one entry appended over HTTP (`POST /entries` with `baseSeq`)
//! - `push.rs`     — the mutations of a sync push (Replicache), moved through what others and
//!   the same client wrote; `push_oracle.rs` is its test oracle
//! - `disabled.rs` — without the sheet model (`engine` feature off) there is nothing to rebase:
//!   uninhabited stand-ins let the append loop compile unchanged

#[cfg(feature = "engine")]
mod append;
#[cfg(not(feature = "engine"))]
mod disabled;
#[cfg(feature = "engine")]
pub(super) mod push;

#[cfg(feature = "engine")]
pub use append::RebasedAppend;
#[cfg(feature = "engine")]
pub(super) use append::{CaughtUp, Rebasing};
#[cfg(not(feature = "engine"))]
pub(super) use disabled::{CaughtUp, Rebasing};

#[cfg(test)]
mod append_tests;
#[cfg(test)]
mod push_tests;

//! Named step boundaries of the protocol, reported to a [`StepHook`] as the worker passes them.
//!
//! Production passes [`NoHooks`]. The fault-injection tests pass a hook that answers
//! [`ControlFlow::Break`] at a chosen step: the worker then stops on the spot, exactly as if the
//! Lambda process had been killed there — no cleanup, no message action — so every crash point
//! of the protocol can be exercised without a single "is test" branch in the logic.

use std::fmt;
use std::ops::ControlFlow;

use async_trait::async_trait;

/// A point in the protocol at which the worker's durable writes so far are complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// Every early-out has passed and the pending item is about to be created.
    BeforePendingItem,
    /// This invocation created the pending item.
    PendingCreated,
    /// This invocation claimed an existing pending item (a retry or a takeover).
    Claimed,
    /// This invocation wrote its `n`th checkpoint (counting from 1).
    Checkpoint(u32),
    /// The manifest is written and its key recorded on the Snapshot entry.
    RootWritten,
    /// The segment's Last Snapshot covers the entry.
    LastSnapshotAdvanced,
    /// The pending item is gone; only deleting the message is left.
    PendingDeleted,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Checkpoint(n) => write!(f, "checkpoint {n}"),
            other => fmt::Debug::fmt(other, f),
        }
    }
}

#[async_trait]
pub trait StepHook: Send + Sync + fmt::Debug {
    /// Called after each step; `Break` stops the worker right there.
    async fn reached(&self, step: Step) -> ControlFlow<()>;
}

/// The production hook: carry on.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

#[async_trait]
impl StepHook for NoHooks {
    async fn reached(&self, _step: Step) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

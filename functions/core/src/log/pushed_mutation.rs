//! One mutation as a sync client pushed it, shared by client runs (`clients.rs`), group commits
//! (`batch.rs`) and rebasing a push (`rebase/push.rs`).

use crate::sheet::event::Event;

/// One mutation as a client pushed it: its id and its event, or why its arguments were refused.
#[derive(Debug, Clone, PartialEq)]
pub struct PushedMutation {
    pub id: u64,
    pub event: Result<Event, String>,
    /// The log's next sequence number in the view the mutation was made against (its arguments'
    /// `baseSeq`): it is rebased through what was committed since. `None`: applied as sent.
    pub base: Option<u64>,
    /// Further events the mutation applies as, after `event`: a delete that rebasing split
    /// around rows others inserted inside its range (`docs/sync.md`). Usually empty.
    pub then: Vec<Event>,
}

impl PushedMutation {
    /// A mutation applied as sent, with no base.
    pub fn new(id: u64, event: Result<Event, String>) -> Self {
        Self {
            id,
            event,
            base: None,
            then: Vec::new(),
        }
    }

    /// A mutation from a mutator's name and arguments as a client sent them: an optional
    /// `baseSeq` (a non-negative integer) is taken out of the arguments, the rest is the event's.
    /// Arguments that do not make an event give the reason instead.
    pub fn from_args(id: u64, name: &str, mut args: serde_json::Value) -> Self {
        let base = match args.as_object_mut().and_then(|o| o.remove("baseSeq")) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                format!("baseSeq must be a non-negative integer (the pull cookie), got {v}")
            }),
        };
        let event = match base {
            Err(ref reason) => Err(reason.clone()),
            Ok(_) if name == "import" => {
                Err("import is not a mutator: files go through the upload flow".into())
            }
            Ok(_) => Event::from_parts(name, args).map_err(|e| e.to_string()),
        };
        Self {
            id,
            event,
            base: base.ok().flatten(),
            then: Vec::new(),
        }
    }
}

//! [`PushRebase::apply`] against the quadratic algorithm it replaced (kept here as the oracle):
//! on random histories and pushes, both give the same events, the same sent forms and the same
//! rejections.

use proptest::prelude::*;
use serde_json::json;

use super::*;

/// The algorithm `apply` replaced: every mutation walked through every committed step since its
/// base (found by scanning), the batch's earlier runs and every earlier mutation of the call.
fn apply_oracle(
    r: &PushRebase,
    client: &str,
    pending: &[&PushedMutation],
    before: &[Event],
) -> Vec<Rebased> {
    let mut out: Vec<Rebased> = Vec::with_capacity(pending.len());
    let mut own: Vec<(Vec<Event>, Vec<Event>)> = Vec::new();
    for m in pending {
        let (rebased, sent) = match (&m.event, m.base) {
            (Ok(event), Some(base)) => one_oracle(r, client, m.id, event, base, before, &own),
            _ => (
                m.event
                    .clone()
                    .map(|e| std::iter::once(e).chain(m.then.clone()).collect()),
                None,
            ),
        };
        let seen = match &m.event {
            Ok(e) => positions(e).into_iter().collect(),
            Err(_) => Vec::new(),
        };
        let applied: Vec<Event> = match &rebased {
            Ok(events) => events.iter().filter_map(positions).collect(),
            Err(_) => Vec::new(),
        };
        own.push((seen, applied));
        out.push(finish(m, rebased, sent));
    }
    out
}

fn one_oracle(
    r: &PushRebase,
    client: &str,
    id: u64,
    event: &Event,
    base: u64,
    before: &[Event],
    own: &[(Vec<Event>, Vec<Event>)],
) -> (Result<Vec<Event>, String>, Option<Event>) {
    if base > r.head {
        return (
            Err(format!(
                "baseSeq {base} is past the log's end ({}): it is not a view of this log",
                r.head
            )),
            None,
        );
    }
    if base < r.floor {
        return (Err(too_old(base, r.head)), positions(event));
    }
    let mut steps: Vec<Step<'_>> = Vec::new();
    for p in r.past.iter().filter(|p| p.seq >= base) {
        match &p.from {
            Some((c, m)) if c == client && *m < id => steps.push(Step::Own {
                seen: &p.seen,
                applied: &p.applied,
            }),
            _ => steps.extend(p.applied.iter().map(Step::Other)),
        }
    }
    steps.extend(before.iter().map(Step::Other));
    steps.extend(
        own.iter()
            .map(|(seen, applied)| Step::Own { seen, applied }),
    );
    let structural = positions(event);
    match rebase(event, &steps) {
        Outcome::Apply(events) => {
            let sent = structural.filter(|_| events.as_slice() != std::slice::from_ref(event));
            (Ok(events), sent)
        }
        Outcome::Reject(reason) => (Err(reason), structural),
    }
}

/// A mutator's name and args on a small sheet (rows 1..12, columns A..F), mostly cell edits.
fn edit() -> impl Strategy<Value = (&'static str, serde_json::Value)> {
    let col = |c: u8| char::from(b'A' + c).to_string();
    prop_oneof![
        4 => (0u8..6, 1u32..12).prop_map(move |(c, r)| ("set", json!({"cells": [{"ref": format!("{}{r}", col(c)), "value": r}]}))),
        1 => (1u32..12, 1u32..3).prop_map(|(at, n)| ("insert-rows", json!({"at": at, "count": n}))),
        1 => (1u32..12, 1u32..4).prop_map(|(at, n)| ("delete-rows", json!({"at": at, "count": n}))),
        1 => (0u8..6, 1u32..3).prop_map(move |(c, n)| ("insert-columns", json!({"at": col(c), "count": n}))),
        1 => (0u8..6, 1u32..3).prop_map(move |(c, n)| ("delete-columns", json!({"at": col(c), "count": n}))),
    ]
}

fn event(e: &(&'static str, serde_json::Value)) -> Option<Event> {
    Event::from_parts(e.0, e.1.clone()).ok()
}

/// A committed step: `from` 0 = a direct append, 1 = another client, 2 = this client (ids
/// below the push's, or, rarely, at or past them), with what it applied as and, for this
/// client, sometimes a different form as sent.
type PastSpec = (
    u8,
    u64,
    (&'static str, serde_json::Value),
    Option<(&'static str, serde_json::Value)>,
);

fn past_item() -> impl Strategy<Value = PastSpec> {
    (
        0u8..3,
        0u64..120,
        edit(),
        proptest::option::weighted(0.3, edit()),
    )
}

#[derive(Debug, Clone)]
struct Case {
    past: Vec<PastSpec>,
    before: Vec<(&'static str, serde_json::Value)>,
    /// (edit, base or none, or an invalid base)
    pending: Vec<((&'static str, serde_json::Value), Option<u64>)>,
    head: u64,
    floor: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec(past_item(), 0..12),
        proptest::collection::vec(edit(), 0..2),
        proptest::collection::vec((edit(), proptest::option::weighted(0.9, 0u64..16)), 1..30),
        0u64..4,
    )
        .prop_map(|(past, before, pending, floor)| Case {
            head: past.len() as u64 + 1,
            past,
            before,
            pending,
            floor,
        })
}

fn build(c: &Case) -> (PushRebase, Vec<Event>, Vec<PushedMutation>) {
    let mut past = Vec::new();
    for (seq, (from, id, applied, sent)) in c.past.iter().enumerate() {
        let Some(applied) = event(applied).and_then(|e| positions(&e)) else {
            continue;
        };
        let (from, seen) = match *from {
            0 => (None, vec![applied.clone()]),
            1 => (Some(("b".to_owned(), *id)), vec![applied.clone()]),
            _ => {
                let seen = sent
                    .as_ref()
                    .and_then(event)
                    .and_then(|e| positions(&e))
                    .unwrap_or_else(|| applied.clone());
                (Some(("a".to_owned(), *id)), vec![seen])
            }
        };
        past.push(Past {
            seq: seq as u64,
            from,
            seen,
            applied: vec![applied],
        });
    }
    let before = c
        .before
        .iter()
        .filter_map(event)
        .filter_map(|e| positions(&e))
        .collect();
    let pending = c
        .pending
        .iter()
        .enumerate()
        .map(|(i, (e, base))| {
            let mut args = e.1.clone();
            if let (Some(b), Some(o)) = (base, args.as_object_mut()) {
                o.insert("baseSeq".into(), json!(b));
            }
            PushedMutation::from_args(100 + i as u64, e.0, args)
        })
        .collect();
    let r = PushRebase {
        newest: c.head,
        read_to: c.head,
        floor: c.floor,
        head: c.head,
        past,
        bases: Vec::new(),
    };
    (r, before, pending)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn the_linear_rebase_gives_what_the_quadratic_one_gave(c in case()) {
        let (r, before, pending) = build(&c);
        let refs: Vec<&PushedMutation> = pending.iter().collect();
        let fast = r.apply("a", &refs, &before);
        let slow = apply_oracle(&r, "a", &refs, &before);
        prop_assert_eq!(format!("{fast:?}"), format!("{slow:?}"));
    }
}

#[test]
fn only_one_run_of_mutations_is_rebased_per_round() {
    let r = PushRebase {
        newest: 0,
        read_to: 0,
        floor: 0,
        head: 0,
        past: Vec::new(),
        bases: vec![0],
    };
    let pending: Vec<PushedMutation> = (1..=MAX_MUTATIONS_PER_ENTRY + 5)
        .map(|id| {
            PushedMutation::from_args(
                id,
                "set",
                json!({"cells": [{"ref": "A1", "value": 1}], "baseSeq": 0}),
            )
        })
        .collect();
    let refs: Vec<&PushedMutation> = pending.iter().collect();
    let out = r.apply("a", &refs, &[]);
    assert_eq!(out.len() as u64, MAX_MUTATIONS_PER_ENTRY);
    assert_eq!(
        format!("{out:?}"),
        format!("{:?}", &apply_oracle(&r, "a", &refs, &[])[..out.len()])
    );
}

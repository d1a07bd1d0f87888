//! Encoding, decoding and validation of client runs and group-commit batches.

use super::*;
use crate::{CellRef, DeleteRows, EntryBody, RowNumber, Value};

/// B2 set to `v`.
fn set(v: f64) -> Event {
    crate::test_support::set_one(CellRef { row: 1, col: 1 }, Value::Number(v))
}

fn sample() -> Mutations {
    Mutations {
        group: "g-1".into(),
        client: "c-1".into(),
        first: 7,
        last: 10,
        applied: vec![
            Mutation {
                id: 7,
                event: set(1.0),
            },
            Mutation {
                id: 9,
                event: Event::DeleteRows(DeleteRows {
                    at: RowNumber(0),
                    count: 2,
                }),
            },
        ],
        sent: vec![],
    }
}

/// A run whose delete was moved by rebasing and whose insert was rejected.
fn with_sent() -> Mutations {
    Mutations {
        sent: vec![
            Mutation {
                id: 9,
                event: Event::DeleteRows(DeleteRows {
                    at: RowNumber(3),
                    count: 2,
                }),
            },
            Mutation {
                id: 10,
                event: Event::InsertRows(crate::InsertRows {
                    at: RowNumber(9),
                    count: 1,
                    values: vec![],
                }),
            },
        ],
        ..sample()
    }
}

#[test]
fn a_run_with_mutations_as_sent_round_trips_as_version_3() {
    let m = with_sent();
    m.validate().unwrap();
    assert_eq!(m.rejected(), vec![8, 10]);
    assert!(matches!(m.sent_as(10), Some(Event::InsertRows(_))));
    assert_eq!(m.sent_as(7), None);
    let (code, version, body) = m.encode();
    assert_eq!((code, version), (TYPE_MUTATIONS, RUN_SENT_VERSION));
    match EntryBody::decode(code, version, &body).unwrap() {
        EntryBody::Mutations(back) => assert_eq!(back, m),
        other => panic!("{other:?}"),
    }
    for cut in 0..body.len() {
        assert!(
            Mutations::decode(version, &body[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    // A version-1 reading of a version-3 body finds trailing bytes, and a version-3 body
    // that records nothing as sent is refused.
    assert!(Mutations::decode(1, &body).is_err());
    assert!(Mutations::decode(RUN_SENT_VERSION, &sample().encode().2).is_err());
    // Only row and column changes, in id order, inside the range.
    let mut bad = with_sent();
    bad.sent.swap(0, 1);
    assert!(bad.validate().is_err());
    let mut bad = with_sent();
    bad.sent[0].event = set(2.0);
    assert!(bad.validate().is_err());
    let mut bad = with_sent();
    bad.sent[1].id = 11;
    assert!(bad.validate().is_err());
}

#[test]
fn a_batch_with_a_run_as_sent_is_version_4_and_keeps_each_runs_version() {
    let mut plain = sample();
    plain.client = "c-2".into();
    let batch = MutationBatch {
        runs: vec![with_sent(), plain.clone()],
    };
    let (code, version, body) = batch.encode();
    assert_eq!((code, version), (TYPE_MUTATIONS, BATCH_SENT_VERSION));
    match EntryBody::decode(code, version, &body).unwrap() {
        EntryBody::Batch(back) => assert_eq!(back, batch),
        other => panic!("{other:?}"),
    }
    assert_eq!(decode_runs(version, &body).unwrap(), batch.runs);
    for cut in 0..body.len() {
        assert!(
            MutationBatch::decode(version, &body[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    // Without a run as sent, a batch is written as before.
    let (_, version, _) = MutationBatch {
        runs: vec![sample(), plain],
    }
    .encode();
    assert_eq!(version, BATCH_VERSION);
}

#[test]
fn a_run_round_trips_and_names_its_rejected_ids() {
    let m = sample();
    m.validate().unwrap();
    assert_eq!(m.rejected(), vec![8, 10]);
    let (code, version, body) = m.encode();
    assert_eq!(code, TYPE_MUTATIONS);
    match EntryBody::decode(code, version, &body).unwrap() {
        EntryBody::Mutations(back) => assert_eq!(back, m),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_runs_are_refused_and_bad_bytes_do_not_decode() {
    let mut m = sample();
    m.applied.swap(0, 1);
    assert!(m.validate().is_err());
    let mut m = sample();
    m.client = "has space".into();
    assert!(m.validate().is_err());
    let mut m = sample();
    m.first = 0;
    assert!(m.validate().is_err());
    let (_, v, body) = sample().encode();
    for cut in 0..body.len() {
        assert!(Mutations::decode(v, &body[..cut]).is_err(), "cut at {cut}");
    }
    let mut extra = body.clone();
    extra.push(0);
    assert!(Mutations::decode(v, &extra).is_err());
    assert!(Mutations::decode(v + 1, &body).is_err());
}

#[test]
fn a_batch_round_trips_and_one_run_stays_version_1() {
    let one = MutationBatch {
        runs: vec![sample()],
    };
    let (code, version, body) = one.encode();
    assert_eq!((code, version), (TYPE_MUTATIONS, 1));
    assert_eq!(body, sample().encode().2);
    let mut other = sample();
    other.client = "c-2".into();
    other.first = 1;
    other.last = 1;
    other.applied = vec![];
    let two = MutationBatch {
        runs: vec![sample(), other.clone()],
    };
    let (code, version, body) = two.encode();
    assert_eq!((code, version), (TYPE_MUTATIONS, BATCH_VERSION));
    match EntryBody::decode(code, version, &body).unwrap() {
        EntryBody::Batch(back) => assert_eq!(back, two),
        other => panic!("{other:?}"),
    }
    assert_eq!(decode_runs(version, &body).unwrap(), two.runs);
    assert_eq!(
        decode_runs(1, &sample().encode().2).unwrap(),
        vec![sample()]
    );
    // Events come out run after run.
    let decoded = EntryBody::decode(code, version, &body).unwrap();
    assert_eq!(decoded.events().count(), 2);
    for cut in 0..body.len() {
        assert!(
            MutationBatch::decode(version, &body[..cut]).is_err(),
            "cut at {cut}"
        );
    }
    let dup = MutationBatch {
        runs: vec![sample(), sample()],
    };
    assert!(dup.validate().is_err());
    let (_, v, body) = dup.encode();
    assert!(MutationBatch::decode(v, &body).is_err());
}

#[test]
fn a_run_with_every_mutation_rejected_is_valid() {
    let m = Mutations {
        applied: vec![],
        ..sample()
    };
    m.validate().unwrap();
    assert_eq!(m.rejected(), vec![7, 8, 9, 10]);
    let (_, v, body) = m.encode();
    assert_eq!(Mutations::decode(v, &body).unwrap(), m);
}

/// A delete split by rebasing is one mutation applied as two events under one id: it round-trips,
/// counts as applied, and ids still may not go backwards.
#[test]
fn a_mutation_applied_as_several_events_round_trips_and_counts_once() {
    let del = |at: u32, count: u32| {
        Event::DeleteRows(DeleteRows {
            at: RowNumber(at),
            count,
        })
    };
    let mut run = sample();
    run.applied.insert(
        2,
        Mutation {
            id: 9,
            event: del(0, 1),
        },
    );
    run.validate().expect("valid");
    assert_eq!(run.rejected(), vec![8, 10]);
    let (_, version, body) = run.encode();
    assert_eq!(Mutations::decode(version, &body).expect("decode"), run);
    run.applied.push(Mutation {
        id: 7,
        event: del(0, 1),
    });
    assert!(run.validate().is_err(), "ids go backwards");
}

#[test]
fn a_deferred_batch_is_version_5_even_for_one_run_and_round_trips() {
    let one = MutationBatch {
        runs: vec![sample()],
    };
    let (code, version, body) = one.encode_deferred();
    assert_eq!((code, version), (TYPE_MUTATIONS, DEFERRED_BATCH_VERSION));
    assert!(is_deferred_version(version) && is_batch_version(version));
    assert!(!is_deferred_version(BATCH_VERSION) && !is_deferred_version(BATCH_SENT_VERSION));
    match EntryBody::decode(code, version, &body).unwrap() {
        EntryBody::Batch(back) => assert_eq!(back, one),
        other => panic!("{other:?}"),
    }
    let mut plain = sample();
    plain.client = "c-2".into();
    let two = MutationBatch {
        runs: vec![with_sent(), plain],
    };
    let (_, version, body) = two.encode_deferred();
    assert_eq!(decode_runs(version, &body).unwrap(), two.runs);
    for cut in 0..body.len() {
        assert!(
            MutationBatch::decode(version, &body[..cut]).is_err(),
            "cut at {cut}"
        );
    }
}

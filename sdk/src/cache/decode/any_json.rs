//! Arbitrary JSON for the decoders' property tests: strings and keys full
//! of the bytes a scanner must not mistake for structure.

use proptest::prelude::*;
use serde_json::{Map, Value};

/// Any JSON value up to `depth` levels of nesting, objects keyed by
/// strings matching `keys` (a proptest regex).
pub(super) fn any_json(keys: &'static str, depth: u32) -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[\\\\\"{}\\[\\],:a-z ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(depth, 96, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

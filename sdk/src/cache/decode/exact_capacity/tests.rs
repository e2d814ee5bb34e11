use std::{collections::BTreeMap, fmt};

use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;
use serde::{
    Deserialize,
    de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor},
};
use serde_json::{Value, json};

use super::*;

#[test]
fn the_scan_counts_every_array_in_the_order_they_open() {
    let doc = br#"{"a": [1, [2, 3], []], "b": "[,]", "c": [{"d": [ 1 ]}, "x\"]"], "e": [ ]}"#;
    assert_eq!(Lengths::scan(doc).all, vec![3, 2, 0, 2, 1, 0]);
}

#[test]
fn bytes_that_are_not_json_scan_without_a_panic() {
    for bad in [&b"]]]"[..], b"[[[", b"\"", b"[\"\\", b"", b"{]", b"[1,,2}"] {
        let _ = Lengths::scan(bad);
        assert!(from_slice::<Value>(bad).is_err());
    }
}

#[test]
fn a_sequence_of_another_length_turns_the_hints_off() {
    let lengths = Lengths::scan(b"[[1, 2], [3]]");
    assert_eq!(lengths.take(), Some(2));
    assert_eq!(lengths.take(), Some(2));
    lengths.check(Some(2), 1);
    assert_eq!(lengths.take(), None);
}

/// A Pod as the API server serves it after kwok marks it Running.
fn running_pod() -> Value {
    let now = "2026-11-26T07:00:00Z";
    let cond = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"},
            "finalizers": ["example.com/a"]},
        "spec": {
            "nodeName": "node-1",
            "containers": [{
                "name": "app", "image": "app:1",
                "args": ["--listen=:8080", "--log-level=info"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"},
                        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            }],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
        },
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.64.0.2"}], "hostIPs": [{"ip": "10.0.0.2"}],
            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"),
                           cond("Ready"), cond("PodReadyToStartContainers")],
            "containerStatuses": [{"name": "app", "image": "app:1", "imageID": "", "ready": true,
                "restartCount": 0, "state": {"running": {"startedAt": now}}}],
        },
    })
}

#[test]
fn a_decoded_pod_is_the_same_pod_with_no_spare_room_in_its_vecs() {
    let bytes = serde_json::to_vec(&running_pod()).unwrap();
    let pod: Pod = from_slice(&bytes).unwrap();
    assert_eq!(pod, serde_json::from_slice::<Pod>(&bytes).unwrap());

    fn exact<T>(what: &str, v: &Option<Vec<T>>) {
        let v = v.as_ref().unwrap();
        assert_eq!(v.capacity(), v.len(), "{what}");
    }
    let spec = pod.spec.as_ref().unwrap();
    let status = pod.status.as_ref().unwrap();
    let container = &spec.containers[0];
    assert_eq!(spec.containers.capacity(), 1);
    exact("finalizers", &pod.metadata.finalizers);
    exact("args", &container.args);
    exact("ports", &container.ports);
    exact("env", &container.env);
    exact("tolerations", &spec.tolerations);
    exact("podIPs", &status.pod_ips);
    exact("hostIPs", &status.host_ips);
    exact("conditions", &status.conditions);
    exact("containerStatuses", &status.container_statuses);
}

#[derive(Deserialize)]
struct Picky {
    a: Vec<u32>,
    b: Vec<String>,
}

#[test]
fn arrays_in_skipped_fields_are_counted_so_the_ones_after_them_are_exact() {
    let doc = br#"{"skip": [[1], [2, 3]], "a": [1, 2, 3, 4, 5], "other": {"z": [1]}, "b": ["x"]}"#;
    let picky: Picky = from_slice(doc).unwrap();
    assert_eq!((picky.a.len(), picky.a.capacity()), (5, 5));
    assert_eq!((picky.b.len(), picky.b.capacity()), (1, 1));
}

#[test]
fn a_skipped_value_serde_json_accepts_is_accepted() {
    // walking `1e400` parses it (out of f64's range); serde_json skips it
    let doc = br#"{"skip": [1e400], "a": [1, 2], "b": ["x"]}"#;
    let picky: Picky = from_slice(doc).unwrap();
    assert_eq!((picky.a, picky.b), (vec![1, 2], vec!["x".to_string()]));
    // without the second try, the walk's own strictness shows
    assert!(deserialize_map(doc, PickyVisitor).is_err());
    assert!(deserialize_map(br#"{"skip": [1e30], "a": [1]}"#, PickyVisitor).is_ok());
}

/// A map visitor that reads `a` and skips everything else.
struct PickyVisitor;

impl<'de> Visitor<'de> for PickyVisitor {
    type Value = Vec<u32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<u32>, A::Error> {
        let mut a = Vec::new();
        while let Some(k) = map.next_key::<String>()? {
            if k == "a" {
                a = map.next_value()?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(a)
    }
}

#[test]
fn trailing_bytes_are_an_error_as_with_serde_json() {
    assert!(from_slice::<Vec<u8>>(b"[1] x").is_err());
    assert_eq!(from_slice::<Vec<u8>>(b" [1] \n").unwrap(), vec![1]);
}

/// Any JSON value, recording each array's size hint; object members whose
/// key starts with `_` are skipped as unknown fields are.
#[derive(Debug)]
enum Tree {
    Scalar(Value),
    List {
        hint: Option<usize>,
        items: Vec<Tree>,
    },
    Map(BTreeMap<String, Tree>),
}

impl Tree {
    /// The value, and whether every array's hint was its length.
    fn into_value(self) -> (Value, bool) {
        match self {
            Tree::Scalar(v) => (v, true),
            Tree::List { hint, items } => {
                let mut exact = hint == Some(items.len());
                let items = items
                    .into_iter()
                    .map(|t| {
                        let (v, e) = t.into_value();
                        exact &= e;
                        v
                    })
                    .collect();
                (Value::Array(items), exact)
            }
            Tree::Map(m) => {
                let mut exact = true;
                let m = m
                    .into_iter()
                    .map(|(k, t)| {
                        let (v, e) = t.into_value();
                        exact &= e;
                        (k, v)
                    })
                    .collect();
                (Value::Object(m), exact)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Tree {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TreeVisitor;
        impl<'de> Visitor<'de> for TreeVisitor {
            type Value = Tree;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON")
            }
            fn visit_unit<E>(self) -> Result<Tree, E> {
                Ok(Tree::Scalar(Value::Null))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Tree, E> {
                Ok(Tree::Scalar(v.into()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Tree, E> {
                Ok(Tree::Scalar(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Tree, E> {
                Ok(Tree::Scalar(v.into()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Tree, E> {
                Ok(Tree::Scalar(v.into()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Tree, A::Error> {
                let hint = seq.size_hint();
                let mut items = Vec::new();
                while let Some(t) = seq.next_element()? {
                    items.push(t);
                }
                Ok(Tree::List { hint, items })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Tree, A::Error> {
                let mut m = BTreeMap::new();
                while let Some(k) = map.next_key::<String>()? {
                    if k.starts_with('_') {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        m.insert(k, map.next_value()?);
                    }
                }
                Ok(Tree::Map(m))
            }
        }
        d.deserialize_any(TreeVisitor)
    }
}

fn without_skipped(v: Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.into_iter().map(without_skipped).collect()),
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.starts_with('_'))
                .map(|(k, v)| (k, without_skipped(v)))
                .collect(),
        ),
        v => v,
    }
}

fn any_json() -> impl Strategy<Value = Value> {
    crate::cache::decode::any_json::any_json("_?[a-z]{1,3}", 5)
}

proptest! {
    /// Every array gets its own length as its hint, skipped members'
    /// arrays included, and the values are serde_json's.
    #[test]
    fn every_array_is_hinted_its_length(v in any_json(), pretty in any::<bool>()) {
        let bytes = if pretty { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) }.unwrap();
        let (decoded, exact) = from_slice::<Tree>(&bytes).unwrap().into_value();
        prop_assert!(exact, "a hint differed from its array's length");
        prop_assert_eq!(decoded, without_skipped(v));
    }

    /// Any bytes: the same answer as serde_json, never a panic.
    #[test]
    fn any_bytes_decode_as_serde_json_decodes_them(bytes in prop::collection::vec(
        prop::sample::select(b"[]{},:\"\\ 019ax.e-".to_vec()), 0..40)) {
        let ours = from_slice::<Value>(&bytes).ok();
        prop_assert_eq!(ours, serde_json::from_slice::<Value>(&bytes).ok());
    }
}

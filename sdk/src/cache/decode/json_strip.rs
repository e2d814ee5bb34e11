//! Cutting `metadata.managedFields` out of JSON bytes before they are
//! deserialized, for informers that drop them anyway: k8s-openapi decodes
//! each entry's `fieldsV1` into a `serde_json::Value` tree (hundreds of
//! small allocations for a Pod written by two managers) only for the
//! strip to free it. A scan that skips values by their brackets and
//! strings is far cheaper than building that tree.
//!
//! The scan only follows the object's structure (top-level members, then
//! `metadata`'s); it never looks inside other values, so a key or string
//! `managedFields` anywhere else is left alone. On bytes that are not a
//! well-formed object it cuts nothing, and the deserializer reports the
//! error as before.

/// Where one member of a JSON object stands: its key string, and its value.
#[derive(Debug, Clone, Copy)]
struct Member {
    /// The index of the key's opening quote.
    start: usize,
    /// The value's first byte.
    value: usize,
}

/// The index of the first non-whitespace byte at or after `i`.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b
        .get(i)
        .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
    {
        i += 1;
    }
    i
}

/// One past the closing quote of the string whose opening quote is at `i`.
pub(super) fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    /// Most strings (keys, names) end within this many bytes: they are
    /// looked at byte by byte, longer ones with `memchr2`.
    const SHORT: usize = 24;
    let mut j = i + 1;
    loop {
        let rest = b.get(j..)?;
        let head = rest.get(..SHORT).unwrap_or(rest);
        j += match head.iter().position(|&c| c == b'"' || c == b'\\') {
            Some(k) => k,
            None => head.len() + memchr::memchr2(b'"', b'\\', rest.get(head.len()..)?)?,
        };
        match b.get(j)? {
            b'"' => return Some(j + 1),
            _ => j += 2,
        }
    }
}

/// One past the last byte of the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => close_of(b, i, 0),
        _ => {
            // a number, true, false or null: up to the next delimiter
            let mut j = i;
            while b
                .get(j)
                .is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// One past the bracket that closes `depth` containers open at `i` (0:
/// the container whose bracket is at `i`, 1: the one `i` is inside of, ...).
fn close_of(b: &[u8], mut i: usize, mut depth: usize) -> Option<usize> {
    loop {
        match b.get(i)? {
            b'"' => {
                i = skip_string(b, i)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// The member `key` (an unescaped name) of the object whose `{` is at
/// `open`, if the object is well formed up to it. Only the values of the
/// members before it are skipped: the member's own value is not walked
/// (a watch line's `object` is almost all of the line).
fn find_member(b: &[u8], open: usize, key: &[u8]) -> Option<Member> {
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return None;
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let start = i;
        let key_end = skip_string(b, i)?;
        let name = b.get(i + 1..key_end - 1)?;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let value = skip_ws(b, i + 1);
        if name == key {
            return Some(Member { start, value });
        }
        i = skip_ws(b, skip_value(b, value)?);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            _ => return None,
        }
    }
}

/// The byte range to cut to remove `member` from its object: the member
/// and the comma after it, or, for the last member, the comma before it;
/// `None` when its value is not well formed.
fn cut_range(b: &[u8], member: Member) -> Option<std::ops::Range<usize>> {
    let end = skip_value(b, member.value)?;
    let after = skip_ws(b, end);
    match b.get(after) {
        Some(b',') => return Some(member.start..after + 1),
        Some(b'}') => {}
        _ => return None,
    }
    // The last member: take the comma before it, if there is one.
    let mut j = member.start;
    while j > 0 {
        j -= 1;
        match b.get(j) {
            Some(b' ' | b'\t' | b'\n' | b'\r') => continue,
            Some(b',') => return Some(j..end),
            _ => break,
        }
    }
    Some(member.start..end)
}

/// The range of `metadata.managedFields` (with its comma) in the object
/// whose `{` is at `open`.
fn managed_fields_range(b: &[u8], open: usize) -> Option<std::ops::Range<usize>> {
    let metadata = find_member(b, open, b"metadata")?;
    let managed = find_member(b, metadata.value, b"managedFields")?;
    cut_range(b, managed)
}

/// `out` = `b` without the ranges in `cuts` (sorted, disjoint); what `out`
/// held is replaced, its allocation kept.
fn without_into(b: &[u8], cuts: &[std::ops::Range<usize>], out: &mut Vec<u8>) {
    let removed: usize = cuts.iter().map(|r| r.len()).sum();
    out.clear();
    out.reserve(b.len().saturating_sub(removed));
    let mut at = 0;
    for cut in cuts {
        out.extend_from_slice(b.get(at..cut.start).unwrap_or_default());
        at = cut.end;
    }
    out.extend_from_slice(b.get(at..).unwrap_or_default());
}

/// A watch line (`{"type":..,"object":{..}}`) without the object's
/// `metadata.managedFields`, written into `out` (a buffer reused from
/// line to line); false, `out` untouched, when it has none (or the line
/// is not well formed): decode the line as it is.
pub(crate) fn watch_line_into(line: &[u8], out: &mut Vec<u8>) -> bool {
    let open = skip_ws(line, 0);
    let Some(object) = find_member(line, open, b"object") else {
        return false;
    };
    let Some(cut) = managed_fields_range(line, object.value) else {
        return false;
    };
    without_into(line, &[cut], out);
    true
}

/// A LIST body (`{..,"items":[{..},..]}`) without each item's
/// `metadata.managedFields`; `None` when no item has them (or the body is
/// not well formed).
pub(crate) fn list_body(body: &[u8]) -> Option<Vec<u8>> {
    let open = skip_ws(body, 0);
    let items = find_member(body, open, b"items")?;
    if body.get(items.value) != Some(&b'[') {
        return None;
    }
    let mut cuts = Vec::new();
    let mut i = skip_ws(body, items.value + 1);
    while body.get(i) == Some(&b'{') {
        // With a cut, the item's end is found from inside its metadata (two
        // objects deep), so the bytes before the cut are walked once.
        let end = match managed_fields_range(body, i) {
            Some(cut) => {
                let end = close_of(body, cut.end, 2)?;
                cuts.push(cut);
                end
            }
            None => skip_value(body, i)?,
        };
        i = skip_ws(body, end);
        match body.get(i) {
            Some(b',') => i = skip_ws(body, i + 1),
            _ => break,
        }
    }
    (!cuts.is_empty()).then(|| {
        let mut out = Vec::new();
        without_into(body, &cuts, &mut out);
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(b: Option<Vec<u8>>) -> String {
        String::from_utf8(b.expect("a cut")).unwrap()
    }

    /// The line cut, into a fresh buffer.
    fn watch_line(line: &[u8]) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        watch_line_into(line, &mut out).then_some(out)
    }

    #[test]
    fn a_reused_buffer_holds_only_the_latest_cut() {
        let mut out = b"left over from a longer line before".repeat(10);
        let line = br#"{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[{}]}}}"#;
        assert!(watch_line_into(line, &mut out));
        assert_eq!(
            out,
            br#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#
        );
        let before = out.clone();
        assert!(!watch_line_into(
            br#"{"type":"ADDED","object":{}}"#,
            &mut out
        ));
        assert_eq!(out, before, "untouched when there is nothing to cut");
    }

    fn json(v: &str) -> serde_json::Value {
        serde_json::from_str(v).unwrap()
    }

    const MF: &str =
        r#"[{"manager":"m","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:a\"}":{}}}}}]"#;

    #[test]
    fn cuts_managed_fields_wherever_it_stands_in_metadata() {
        for meta in [
            format!(r#"{{"managedFields":{MF},"name":"a","namespace":"n"}}"#),
            format!(r#"{{"name":"a","managedFields":{MF},"namespace":"n"}}"#),
            format!(r#"{{"name":"a","namespace":"n","managedFields":{MF}}}"#),
            format!(
                r#"{{ "name" : "a" , "namespace":"n" ,
                "managedFields" : {MF} }}"#
            ),
        ] {
            let line = format!(
                r#"{{"type":"ADDED","object":{{"kind":"Pod","metadata":{meta},"spec":{{}}}}}}"#
            );
            let out = s(watch_line(line.as_bytes()));
            let v = json(&out);
            assert_eq!(
                v["object"]["metadata"],
                json(r#"{"name":"a","namespace":"n"}"#),
                "{out}"
            );
            assert_eq!(v["object"]["spec"], json("{}"));
            assert_eq!(v["type"], "ADDED");
        }
        // the only member
        let line =
            format!(r#"{{"type":"DELETED","object":{{"metadata":{{"managedFields":{MF}}}}}}}"#);
        assert_eq!(
            json(&s(watch_line(line.as_bytes())))["object"]["metadata"],
            json("{}")
        );
    }

    #[test]
    fn leaves_managed_fields_elsewhere_alone() {
        // in an annotation, as a key of the spec, inside strings
        let line = r#"{"type":"MODIFIED","object":{"spec":{"managedFields":[1]},"metadata":{"name":"a","annotations":{"managedFields":"[\"x\"]","b":"\"managedFields\":[]"}}}}"#;
        assert!(watch_line(line.as_bytes()).is_none());
        let list = r#"{"items":[{"metadata":{"labels":{"managedFields":"x"}}}]}"#;
        assert!(list_body(list.as_bytes()).is_none());
    }

    #[test]
    fn cuts_every_item_of_a_list() {
        let body = format!(
            r#"{{"kind":"PodList","metadata":{{"resourceVersion":"5","managedFields":[]}},"items":[{{"metadata":{{"name":"a","managedFields":{MF}}}}}, {{"metadata":{{"name":"b"}}}},{{"metadata":{{"managedFields":{MF},"name":"c"}},"status":{{"phase":"Running"}}}}]}}"#
        );
        let v = json(&s(list_body(body.as_bytes())));
        assert_eq!(v["items"][0]["metadata"], json(r#"{"name":"a"}"#));
        assert_eq!(v["items"][1]["metadata"], json(r#"{"name":"b"}"#));
        assert_eq!(v["items"][2]["metadata"], json(r#"{"name":"c"}"#));
        assert_eq!(v["items"][2]["status"]["phase"], "Running");
        // the list's own metadata is not an item's: left as it was
        assert_eq!(v["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn cuts_nothing_from_what_is_not_well_formed() {
        for bad in [
            "",
            "{",
            "not json",
            r#"{"type":"ADDED","object":{"metadata":{"managedFields":[{"a":1}"#,
            r#"{"type":"ADDED","object":{"metadata":{"name":"a" "managedFields":[]}}}"#,
            r#"{"type":"ADDED","object":{"metadata":{"name":"unterminated}}}"#,
        ] {
            assert!(watch_line(bad.as_bytes()).is_none(), "{bad}");
            assert!(list_body(bad.as_bytes()).is_none(), "{bad}");
        }
    }

    mod props {
        use super::super::*;
        use super::watch_line;
        use proptest::prelude::*;
        use serde_json::{Map, Value};

        fn value() -> impl Strategy<Value = Value> {
            crate::cache::decode::any_json::any_json("[\\\\\"{}a-zA-Z]{0,6}", 3)
        }

        /// An object whose metadata may hold `managedFields`, among other
        /// members that may be named like it one level down.
        fn object() -> impl Strategy<Value = Value> {
            (
                prop::collection::btree_map("[a-zA-Z\\\\\"]{1,6}", value(), 0..4),
                proptest::option::of(value()),
                value(),
            )
                .prop_map(|(meta, managed, spec)| {
                    let mut metadata: Map<String, Value> = meta.into_iter().collect();
                    if let Some(m) = managed {
                        metadata.insert("managedFields".into(), m);
                    }
                    serde_json::json!({ "apiVersion": "v1", "metadata": metadata, "spec": spec })
                })
        }

        fn stripped(mut v: Value) -> Value {
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            v
        }

        proptest! {
            #[test]
            fn a_cut_watch_line_is_the_object_without_managed_fields(
                obj in object(),
                pretty in any::<bool>(),
            ) {
                let line = serde_json::json!({ "type": "MODIFIED", "object": obj.clone() });
                let bytes = if pretty {
                    serde_json::to_vec_pretty(&line).unwrap()
                } else {
                    serde_json::to_vec(&line).unwrap()
                };
                let had = obj["metadata"].get("managedFields").is_some();
                match watch_line(&bytes) {
                    Some(cut) => {
                        prop_assert!(had);
                        let v: Value = serde_json::from_slice(&cut).unwrap();
                        prop_assert_eq!(&v["object"], &stripped(obj));
                        prop_assert_eq!(&v["type"], "MODIFIED");
                    }
                    None => prop_assert!(!had),
                }
            }

            #[test]
            fn a_cut_list_is_every_item_without_managed_fields(
                items in prop::collection::vec(object(), 0..5),
                pretty in any::<bool>(),
            ) {
                let body = serde_json::json!({
                    "kind": "List",
                    "metadata": { "resourceVersion": "1" },
                    "items": items.clone(),
                });
                let bytes = if pretty {
                    serde_json::to_vec_pretty(&body).unwrap()
                } else {
                    serde_json::to_vec(&body).unwrap()
                };
                let any = items.iter().any(|o| o["metadata"].get("managedFields").is_some());
                match list_body(&bytes) {
                    Some(cut) => {
                        prop_assert!(any);
                        let v: Value = serde_json::from_slice(&cut).unwrap();
                        let want: Vec<Value> = items.into_iter().map(stripped).collect();
                        prop_assert_eq!(&v["items"], &Value::Array(want));
                    }
                    None => prop_assert!(!any),
                }
            }
        }
    }
}

//! YAML documents kept in their key order (`deploy/` as written), and
//! written back out block style, with Helm template actions where the chart
//! puts them.

use std::fmt::Write as _;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A YAML node. Maps keep their key order; `Action` and `Block` and `Wrap`
/// only appear in a chart's templates.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
    /// Written as is where a scalar goes: `"{{ .Values.replicas }}"`.
    Action(String),
    /// A value rendered by Helm at the indentation of the key's children:
    /// `key: {{- toYaml EXPR | nindent N }}`.
    Block(String),
    /// The entry (map entry or sequence item) between `{{- OPEN }}` and
    /// `{{- end }}`: `if ...` or `with ...`.
    Wrap(String, Box<Node>),
}

impl Node {
    /// The value at `key` of a map.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value at `key` of a map, to change it.
    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match self {
            Node::Map(entries) => entries.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The value at a path of map keys.
    pub(crate) fn at(&self, path: &[&str]) -> Option<&Node> {
        path.iter().try_fold(self, |node, key| node.get(key))
    }

    /// The value at a path of map keys, to change it.
    pub(crate) fn at_mut(&mut self, path: &[&str]) -> Option<&mut Node> {
        path.iter().try_fold(self, |node, key| node.get_mut(key))
    }

    /// The string, if this is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Sets `key` of a map (appending it when absent); no-op on other nodes.
    pub(crate) fn set(&mut self, key: &str, value: Node) {
        if let Node::Map(entries) = self {
            match entries.iter_mut().find(|(k, _)| k == key) {
                Some((_, v)) => *v = value,
                None => entries.push((key.to_owned(), value)),
            }
        }
    }

    /// Inserts `key` before `before` in a map (at the end when `before` is
    /// absent); no-op on other nodes.
    pub(crate) fn insert_before(&mut self, before: &str, key: &str, value: Node) {
        if let Node::Map(entries) = self {
            let at = entries
                .iter()
                .position(|(k, _)| k == before)
                .unwrap_or(entries.len());
            entries.insert(at, (key.to_owned(), value));
        }
    }

    /// Calls `f` on every string of this tree, with its key (the map key it
    /// is the value of; `None` in a sequence).
    pub(crate) fn visit_strings(
        &mut self,
        key: Option<&str>,
        f: &mut impl FnMut(Option<&str>, &mut Node),
    ) {
        match self {
            Node::Str(_) => f(key, self),
            Node::Seq(items) => items.iter_mut().for_each(|i| i.visit_strings(None, f)),
            Node::Map(entries) => entries
                .iter_mut()
                .for_each(|(k, v)| v.visit_strings(Some(k.as_str()), f)),
            Node::Wrap(_, inner) => inner.visit_strings(key, f),
            _ => {}
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Node, E> {
        i64::try_from(v)
            .map(Node::Int)
            .map_err(|_| E::custom(format!("integer {v} is too large")))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Node>()? {
            entries.push((key, value));
        }
        Ok(Node::Map(entries))
    }
}

/// The documents of a multi-document YAML text, empty ones skipped.
pub(crate) fn parse(text: &str) -> Result<Vec<Node>, String> {
    let docs: Vec<Node> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| *d != Node::Null).collect())
}

/// `node` as a YAML document (no `---`), ending in a newline.
pub(crate) fn emit(node: &Node) -> String {
    let mut out = String::new();
    match node {
        Node::Map(entries) => write_map(&mut out, entries, 0),
        Node::Seq(items) => write_seq(&mut out, items, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn write_map(out: &mut String, entries: &[(String, Node)], indent: usize) {
    for (key, value) in entries {
        write_entry(out, key, value, indent);
    }
}

fn write_entry(out: &mut String, key: &str, value: &Node, indent: usize) {
    if let Node::Wrap(open, inner) = value {
        pad(out, indent);
        let _ = writeln!(out, "{{{{- {open} }}}}");
        write_entry(out, key, inner, indent);
        pad(out, indent);
        out.push_str("{{- end }}\n");
        return;
    }
    pad(out, indent);
    out.push_str(&string(key));
    out.push(':');
    match value {
        Node::Map(entries) if !entries.is_empty() => {
            out.push('\n');
            write_map(out, entries, indent + 2);
        }
        Node::Seq(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent);
        }
        Node::Block(expr) => {
            let _ = writeln!(out, " {{{{- {expr} | nindent {} }}}}", indent + 2);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn write_seq(out: &mut String, items: &[Node], indent: usize) {
    for item in items {
        write_item(out, item, indent);
    }
}

fn write_item(out: &mut String, item: &Node, indent: usize) {
    if let Node::Wrap(open, inner) = item {
        pad(out, indent);
        let _ = writeln!(out, "{{{{- {open} }}}}");
        write_item(out, inner, indent);
        pad(out, indent);
        out.push_str("{{- end }}\n");
        return;
    }
    pad(out, indent);
    out.push_str("- ");
    match item {
        Node::Map(entries) if !entries.is_empty() => {
            // The first entry on the dash's line, the rest under it.
            let mut nested = String::new();
            write_map(&mut nested, entries, indent + 2);
            out.push_str(nested.trim_start_matches(' '));
        }
        Node::Seq(items) if !items.is_empty() => {
            out.push('\n');
            write_seq(out, items, indent + 2);
        }
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn scalar(node: &Node) -> String {
    match node {
        Node::Null => "null".to_owned(),
        Node::Bool(b) => b.to_string(),
        Node::Int(i) => i.to_string(),
        Node::Float(f) => format!("{f:?}"),
        Node::Str(s) => string(s),
        Node::Action(a) => a.clone(),
        Node::Seq(_) => "[]".to_owned(),
        Node::Map(_) => "{}".to_owned(),
        // Only reached for a Block or Wrap inside a sequence item's value.
        Node::Block(expr) => format!("{{{{ {expr} }}}}"),
        Node::Wrap(_, inner) => scalar(inner),
    }
}

/// A string plain when YAML reads it back as the same string, else
/// double-quoted (JSON's escapes are YAML's).
fn string(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-=@+:".contains(c))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric() || "/.-".contains(c))
        && !s.ends_with(':')
        && !s.contains("://")
        && !s.contains(": ")
        && !looks_typed(s);
    if plain {
        s.to_owned()
    } else {
        serde_json::Value::String(s.to_owned()).to_string()
    }
}

/// Whether a plain scalar would read as something else than a string
/// (YAML 1.1 or 1.2): a boolean, null, or a number.
fn looks_typed(s: &str) -> bool {
    const WORDS: [&str; 12] = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", ".nan",
    ];
    WORDS.contains(&s.to_ascii_lowercase().as_str())
        || s.starts_with(|c: char| c.is_ascii_digit() || c == '.' || c == '+' || c == '-')
            && s.chars()
                .all(|c| c.is_ascii_digit() || "._+-:eExXoObB".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_read_back_as_written_in_their_key_order() {
        let text = "b: 1\na:\n  - x: \"true\"\n    y: [1, 2.5]\n  - plain\nc: {}\nd: \"a: b\"\ne: \"010\"\nf: null\ng: \"line\\nbreak\"\n---\n---\nk: v\n";
        let docs = parse(text).expect("parse");
        assert_eq!(docs.len(), 2);
        let out = emit(&docs[0]);
        assert_eq!(
            out,
            "b: 1\na:\n- x: \"true\"\n  \"y\":\n  - 1\n  - 2.5\n- plain\nc: {}\nd: \"a: b\"\ne: \"010\"\nf: null\ng: \"line\\nbreak\"\n"
        );
        assert_eq!(parse(&out).expect("reparse"), vec![docs[0].clone()]);
    }

    #[test]
    fn helm_actions_are_written_where_they_go() {
        let doc = Node::Map(vec![
            (
                "replicas".into(),
                Node::Action("{{ .Values.replicas }}".into()),
            ),
            (
                "resources".into(),
                Node::Block("toYaml .Values.resources".into()),
            ),
            (
                "ports".into(),
                Node::Seq(vec![Node::Wrap(
                    "if .Values.metrics.enabled".into(),
                    Box::new(Node::Map(vec![(
                        "name".into(),
                        Node::Str("metrics".into()),
                    )])),
                )]),
            ),
        ]);
        assert_eq!(
            emit(&doc),
            "replicas: {{ .Values.replicas }}\nresources: {{- toYaml .Values.resources | nindent 2 }}\nports:\n{{- if .Values.metrics.enabled }}\n- name: metrics\n{{- end }}\n"
        );
    }
}

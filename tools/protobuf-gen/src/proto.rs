//! The `generated.proto` files of the Kubernetes API modules: messages and
//! their fields (number, label, type).

use std::collections::BTreeMap;

/// How a field repeats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// `optional` (proto2).
    Optional,
    /// `repeated`.
    Repeated,
    /// `map<string, V>`: the value's type is the field's type.
    Map,
}

/// One field of a message.
#[derive(Debug, Clone)]
pub struct Field {
    /// The field's name in the `.proto` file.
    pub name: String,
    /// Its number.
    pub number: u32,
    /// Optional, repeated or a map.
    pub label: Label,
    /// A scalar type (`string`, `int32`, ...) or a message's full name
    /// (`k8s.io.api.core.v1.PodSpec`); for a map, the value's type.
    pub ty: String,
}

/// One message.
#[derive(Debug, Clone)]
pub struct Message {
    /// The package it is in (`k8s.io.api.core.v1`).
    pub package: String,
    /// Its name within the package (`Pod`).
    pub name: String,
    /// Its fields, in file order.
    pub fields: Vec<Field>,
}

/// The scalar types the Kubernetes messages use.
pub const SCALARS: &[&str] = &["string", "bytes", "bool", "int32", "int64", "double"];

fn resolve(package: &str, ty: &str) -> String {
    if SCALARS.contains(&ty) {
        ty.to_owned()
    } else if let Some(full) = ty.strip_prefix('.') {
        full.to_owned()
    } else if ty.contains('.') {
        ty.to_owned()
    } else {
        format!("{package}.{ty}")
    }
}

/// Parses one `generated.proto` into `out` (keyed by full name).
pub fn parse(text: &str, file: &str, out: &mut BTreeMap<String, Message>) -> Result<(), String> {
    let mut package = String::new();
    let mut current: Option<Message> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split("//").next().unwrap_or("").trim();
        let at = || format!("{file}:{}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(p) = line.strip_prefix("package ") {
            package = p.trim_end_matches(';').trim().to_owned();
        } else if let Some(rest) = line.strip_prefix("message ") {
            if current.is_some() {
                return Err(format!("{}: nested message", at()));
            }
            let name = rest.trim_end_matches('{').trim().to_owned();
            current = Some(Message {
                package: package.clone(),
                name,
                fields: Vec::new(),
            });
        } else if line == "}" {
            let m = current
                .take()
                .ok_or_else(|| format!("{}: unbalanced brace", at()))?;
            out.insert(format!("{}.{}", m.package, m.name), m);
        } else if let Some(m) = current.as_mut() {
            let (decl, number) = line
                .trim_end_matches(';')
                .split_once('=')
                .ok_or_else(|| format!("{}: cannot read field {line:?}", at()))?;
            let number: u32 = number
                .trim()
                .parse()
                .map_err(|_| format!("{}: bad field number in {line:?}", at()))?;
            let decl = decl.trim();
            let (label, ty, name) = if let Some(rest) = decl.strip_prefix("map<") {
                let (types, name) = rest
                    .split_once('>')
                    .ok_or_else(|| format!("{}: bad map {line:?}", at()))?;
                let (key, value) = types
                    .split_once(',')
                    .ok_or_else(|| format!("{}: bad map {line:?}", at()))?;
                if key.trim() != "string" {
                    return Err(format!("{}: map key {key:?} is not a string", at()));
                }
                (Label::Map, value.trim(), name.trim())
            } else {
                let parts: Vec<&str> = decl.split_whitespace().collect();
                match parts.as_slice() {
                    ["optional", ty, name] => (Label::Optional, *ty, *name),
                    ["repeated", ty, name] => (Label::Repeated, *ty, *name),
                    _ => return Err(format!("{}: cannot read field {line:?}", at())),
                }
            };
            m.fields.push(Field {
                name: name.to_owned(),
                number,
                label,
                ty: resolve(&package, ty),
            });
        }
        // syntax, import, option: nothing to keep
    }
    if current.is_some() {
        return Err(format!("{file}: unterminated message"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_maps_and_references() {
        let text = "syntax = \"proto2\";\npackage k8s.io.api.core.v1;\n\
            // a comment\nmessage Pod {\n  optional k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta metadata = 1;\n\
            optional PodSpec spec = 2;\n  repeated string names = 3;\n\
            map<string, .k8s.io.apimachinery.pkg.api.resource.Quantity> limits = 4;\n}\n";
        let mut out = BTreeMap::new();
        parse(text, "x.proto", &mut out).unwrap();
        let pod = &out["k8s.io.api.core.v1.Pod"];
        let tys: Vec<_> = pod.fields.iter().map(|f| f.ty.as_str()).collect();
        assert_eq!(
            tys,
            [
                "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta",
                "k8s.io.api.core.v1.PodSpec",
                "string",
                "k8s.io.apimachinery.pkg.api.resource.Quantity"
            ]
        );
        assert_eq!(pod.fields[3].label, Label::Map);
        assert_eq!(pod.fields[2].label, Label::Repeated);
    }
}

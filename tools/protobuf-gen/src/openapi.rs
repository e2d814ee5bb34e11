//! The `k8s-openapi` types the decoders produce, read from the crate's
//! source: each type's definition name, its fields with their Rust types,
//! and the JSON name of each field (from its `Deserialize` impl).

use std::{collections::BTreeMap, fs, path::Path};

/// A Rust field type, as far as the decoders care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RType {
    /// `Option<T>`.
    Opt(Box<RType>),
    /// `Vec<T>`.
    Vec(Box<RType>),
    /// `BTreeMap<String, T>`.
    Map(Box<RType>),
    /// `Box<T>`.
    Boxed(Box<RType>),
    /// `String`.
    String,
    /// `bool`.
    Bool,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `f64`.
    F64,
    /// `k8s_openapi::ByteString`.
    ByteString,
    /// Another k8s-openapi type, by path (`k8s_openapi::api::core::v1::PodSpec`).
    Named(String),
}

impl RType {
    fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let generic = |prefix: &str| {
            s.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix('>'))
                .map(str::to_owned)
        };
        if let Some(inner) = generic("Option<") {
            return Ok(Self::Opt(Box::new(Self::parse(&inner)?)));
        }
        if let Some(inner) = generic("std::vec::Vec<") {
            return Ok(Self::Vec(Box::new(Self::parse(&inner)?)));
        }
        if let Some(inner) = generic("std::boxed::Box<") {
            return Ok(Self::Boxed(Box::new(Self::parse(&inner)?)));
        }
        if let Some(inner) = generic("std::collections::BTreeMap<") {
            let value = inner
                .strip_prefix("std::string::String,")
                .ok_or_else(|| format!("map with a key that is not a string: {s}"))?;
            return Ok(Self::Map(Box::new(Self::parse(value)?)));
        }
        Ok(match s {
            "std::string::String" => Self::String,
            "bool" => Self::Bool,
            "i32" => Self::I32,
            "i64" => Self::I64,
            "f64" => Self::F64,
            "crate::ByteString" => Self::ByteString,
            _ => match s.strip_prefix("crate::") {
                Some(path) => Self::Named(format!("k8s_openapi::{path}")),
                None => return Err(format!("unknown field type {s}")),
            },
        })
    }
}

/// One field of a struct.
#[derive(Debug, Clone)]
pub struct RField {
    /// The Rust field name.
    pub name: String,
    /// Its type.
    pub ty: RType,
}

/// The shape of a type.
#[derive(Debug, Clone)]
pub enum Shape {
    /// A struct with named fields.
    Struct {
        /// Its fields, in declaration order.
        fields: Vec<RField>,
        /// Rust field name by JSON name.
        json: BTreeMap<String, String>,
        /// It implements `Default`.
        default: bool,
    },
    /// A newtype (`Quantity(String)`, `RawExtension(Value)`, ...) or an
    /// enum (`IntOrString`, `JSONSchemaPropsOrBool`, ...): mapped by hand.
    Special,
}

/// One k8s-openapi type.
#[derive(Debug, Clone)]
pub struct RTypeDef {
    /// `io.k8s.api.core.v1.Pod`.
    pub definition: String,
    /// `k8s_openapi::api::core::v1::Pod`.
    pub path: String,
    /// Its shape.
    pub shape: Shape,
    /// It is a `ListableResource` (a kind an informer lists and watches).
    pub listable: bool,
}

/// Every type of the crate's version module, by Rust path.
pub fn read(version_dir: &Path) -> Result<BTreeMap<String, RTypeDef>, String> {
    let mut out = BTreeMap::new();
    walk(version_dir, version_dir, &mut out)?;
    Ok(out)
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, RTypeDef>) -> Result<(), String> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(root, &path, out)?;
            continue;
        }
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let Some(definition) = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// Generated from definition "))
        else {
            continue;
        };
        let module: Vec<String> = path
            .parent()
            .and_then(|p| p.strip_prefix(root).ok())
            .map(|p| {
                p.components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        if let Some(def) = read_type(&text, definition.trim(), &module)? {
            out.insert(def.path.clone(), def);
        }
    }
    Ok(())
}

fn read_type(text: &str, definition: &str, module: &[String]) -> Result<Option<RTypeDef>, String> {
    let mut name = None;
    let mut braced = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("pub struct ") {
            if let Some(n) = rest.strip_suffix(" {") {
                name = Some(n.to_owned());
                braced = true;
            } else if let Some((n, _)) = rest.split_once('(') {
                name = Some(n.to_owned());
            }
            break;
        }
        if let Some(rest) = line.strip_prefix("pub enum ") {
            name = rest.split([' ', '<']).next().map(str::to_owned);
            if rest.contains('<') {
                return Ok(None); // WatchEvent<T>: not an API type
            }
            break;
        }
    }
    let Some(name) = name.filter(|n| !n.contains('<')) else {
        return Ok(None); // List<T>: not an API type
    };
    let path = format!("k8s_openapi::{}::{name}", module.join("::"));
    let listable = text.contains(&format!("impl crate::ListableResource for {name} "));
    if !braced {
        return Ok(Some(RTypeDef {
            definition: definition.to_owned(),
            path,
            shape: Shape::Special,
            listable,
        }));
    }
    let header = format!("pub struct {name} {{");
    let body = text
        .split_once(&header)
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .ok_or_else(|| format!("{path}: no struct body"))?;
    let mut fields = Vec::new();
    for line in body.lines() {
        if let Some(decl) = line.strip_prefix("    pub ") {
            let (n, ty) = decl
                .split_once(": ")
                .ok_or_else(|| format!("{path}: cannot read {line:?}"))?;
            fields.push(RField {
                name: n.to_owned(),
                ty: RType::parse(ty.trim_end_matches(','))
                    .map_err(|e| format!("{path}.{n}: {e}"))?,
            });
        }
    }
    let mut json = BTreeMap::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some((key, field)) = l.split_once("\" => Field::Key_")
            && let Some(key) = key.strip_prefix('"')
        {
            json.insert(key.to_owned(), field.trim_end_matches(',').to_owned());
        }
    }
    let default = text
        .lines()
        .any(|l| l.starts_with("#[derive(") && l.contains("Default"))
        || text.contains(&format!("impl Default for {name} "));
    Ok(Some(RTypeDef {
        definition: definition.to_owned(),
        path,
        shape: Shape::Struct {
            fields,
            json,
            default,
        },
        listable,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_field_types() {
        assert_eq!(
            RType::parse("Option<std::collections::BTreeMap<std::string::String, crate::apimachinery::pkg::api::resource::Quantity>>").unwrap(),
            RType::Opt(Box::new(RType::Map(Box::new(RType::Named(
                "k8s_openapi::apimachinery::pkg::api::resource::Quantity".into()
            )))))
        );
        assert_eq!(
            RType::parse("std::vec::Vec<std::string::String>").unwrap(),
            RType::Vec(Box::new(RType::String))
        );
        assert!(RType::parse("u8").is_err());
    }
}

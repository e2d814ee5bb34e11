//! The Go structs behind the messages: what the `.proto` files do not say
//! and the JSON encoding depends on (a field's JSON name, whether it is a
//! pointer, `omitempty`, and whether it is inlined into its parent).

use std::collections::BTreeMap;

/// What the Go struct says of one protobuf field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoField {
    /// The JSON name (empty for an inlined struct).
    pub json: String,
    /// The Go type is a pointer: JSON shows a zero value that is set.
    pub pointer: bool,
    /// `omitempty`: JSON leaves a zero value out.
    pub omitempty: bool,
    /// `json:",inline"`: the struct's fields are the parent's in JSON.
    pub inline: bool,
}

/// The Go fields of one package.
#[derive(Debug, Clone, Default)]
pub struct GoPackage {
    /// By (struct name, protobuf field name); a field whose tag has no
    /// name is keyed by `#<number>`.
    pub fields: BTreeMap<(String, String), GoField>,
    /// `type X other.Y`: X's fields are Y's (by Y's name, package left
    /// out).
    pub aliases: BTreeMap<String, String>,
}

/// The value of `key:"..."` in a struct tag.
fn tag<'a>(tags: &'a str, key: &str) -> Option<&'a str> {
    let start = tags.find(&format!("{key}:\""))? + key.len() + 2;
    let rest = &tags[start..];
    Some(&rest[..rest.find('"')?])
}

/// Reads the struct fields with a `protobuf` tag from one Go file.
pub fn parse(text: &str, out: &mut GoPackage) {
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("type ") {
            if let Some(name) = rest.strip_suffix(" struct {") {
                current = Some(name.trim().to_owned());
            } else if let [name, target] = rest.split_whitespace().collect::<Vec<_>>()[..]
                && let Some((_, other)) = target.split_once('.')
            {
                out.aliases.insert(name.to_owned(), other.to_owned());
            }
            continue;
        }
        if line.starts_with('}') {
            current = None;
            continue;
        }
        let Some(strukt) = &current else { continue };
        let code = line.trim();
        if code.starts_with("//") {
            continue;
        }
        let Some((decl, tags)) = code.split_once('`') else {
            continue;
        };
        let Some(pb) = tag(tags, "protobuf") else {
            continue;
        };
        let parts: Vec<&str> = pb.split(',').collect();
        let name = match parts.iter().find_map(|p| p.strip_prefix("name=")) {
            Some(name) => name.to_owned(),
            None => match parts.get(1) {
                Some(number) => format!("#{number}"),
                None => continue,
            },
        };
        let words: Vec<&str> = decl.split_whitespace().collect();
        let go_type = match words.as_slice() {
            [ty] => *ty,
            [_, ty] => *ty,
            _ => continue,
        };
        let json = tag(tags, "json").unwrap_or("");
        let mut opts = json.split(',');
        let json_name = opts.next().unwrap_or("").to_owned();
        let opts: Vec<&str> = opts.collect();
        out.fields.insert(
            (strukt.clone(), name),
            GoField {
                inline: opts.contains(&"inline"),
                omitempty: opts.contains(&"omitempty"),
                pointer: go_type.starts_with('*'),
                json: json_name,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tags_pointers_and_inlines() {
        let text = "type Volume struct {\n\tName string `json:\"name\" protobuf:\"bytes,1,opt,name=name\"`\n\
            \tVolumeSource `json:\",inline\" protobuf:\"bytes,2,opt,name=volumeSource\"`\n}\n\
            type PodSpec struct {\n\t// doc\n\tAutomount *bool `json:\"automountServiceAccountToken,omitempty\" protobuf:\"varint,21,opt,name=automountServiceAccountToken\"`\n}\n";
        let mut out = GoPackage::default();
        parse(text, &mut out);
        let out = out.fields;
        let name = &out[&("Volume".into(), "name".into())];
        assert!(!name.pointer && !name.omitempty && name.json == "name");
        assert!(out[&("Volume".into(), "volumeSource".into())].inline);
        let a = &out[&("PodSpec".into(), "automountServiceAccountToken".into())];
        assert!(a.pointer && a.omitempty);
    }
}

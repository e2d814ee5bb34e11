//! Rust decoders from the three sources: for each k8s-openapi struct a
//! reachable kind needs, a function that walks its message's fields on the
//! wire and moves each value into the struct's field, with no intermediate
//! message. A field that cannot be mapped is an error naming it.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use crate::{
    gotypes::{GoField, GoPackage},
    openapi::{RType, RTypeDef, Shape},
    proto::{Label, Message},
};

/// Everything the generator reads.
pub struct Inputs {
    /// Messages by full name.
    pub messages: BTreeMap<String, Message>,
    /// Go fields by proto package.
    pub go: BTreeMap<String, GoPackage>,
    /// k8s-openapi types by Rust path.
    pub types: BTreeMap<String, RTypeDef>,
}

/// The message full name of a k8s-openapi definition name.
fn message_name(definition: &str) -> String {
    for (from, to) in [
        ("io.k8s.api.", "k8s.io.api."),
        ("io.k8s.apimachinery.", "k8s.io.apimachinery."),
        (
            "io.k8s.apiextensions-apiserver.",
            "k8s.io.apiextensions_apiserver.",
        ),
        ("io.k8s.kube-aggregator.", "k8s.io.kube_aggregator."),
    ] {
        if let Some(rest) = definition.strip_prefix(from) {
            return format!("{to}{rest}");
        }
    }
    definition.to_owned()
}

/// A Rust identifier for a type path.
fn ident(path: &str) -> String {
    path.trim_start_matches("k8s_openapi::").replace("::", "_")
}

const META: &str = "k8s_openapi::apimachinery::pkg::apis::meta::v1::";
const APIEXT: &str = "k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::";

/// How one value (an element of a field) is decoded from `v` (a wire
/// value) with `d` (the options).
struct Elem {
    /// Expression of the value's type, or of `Option` of it (`nullable`).
    expr: String,
    /// `expr` is an `Option`: `None` is what JSON shows as `null`.
    nullable: bool,
    /// The type wraps a JSON value that can be `null` (`RawExtension`).
    null_value: bool,
    /// The type implements `Default`.
    default: bool,
    /// A scalar: how a packed list of it is read (`Varint`, `Fixed64`).
    packed: Option<&'static str>,
    /// The Go zero value is left out of JSON when `omitempty` (scalars).
    scalar: bool,
    /// A struct that JSON always shows when its Go field is not a pointer.
    always_shown: bool,
}

impl Elem {
    fn plain(expr: String) -> Self {
        Self {
            expr,
            nullable: false,
            null_value: false,
            default: true,
            packed: None,
            scalar: false,
            always_shown: false,
        }
    }
}

/// The generator's state: what is emitted and what is left to emit.
pub struct Gen<'a> {
    inputs: &'a Inputs,
    out: String,
    queued: BTreeSet<String>,
    queue: Vec<String>,
    errors: Vec<String>,
    needs_schema_props: bool,
}

impl<'a> Gen<'a> {
    /// A generator over `inputs`.
    pub fn new(inputs: &'a Inputs) -> Self {
        Self {
            inputs,
            out: String::new(),
            queued: BTreeSet::new(),
            queue: Vec::new(),
            errors: Vec::new(),
            needs_schema_props: false,
        }
    }

    fn message_of(&self, def: &RTypeDef) -> Option<&'a Message> {
        self.inputs.messages.get(&message_name(&def.definition))
    }

    fn want(&mut self, path: &str) {
        if self.queued.insert(path.to_owned()) {
            self.queue.push(path.to_owned());
        }
    }

    /// The decoders of every listable kind (and of `extra` types), the
    /// codec table, and the kinds left on JSON; or every field that could
    /// not be mapped.
    pub fn run(mut self, extra: &[&str]) -> Result<String, Vec<String>> {
        let mut kinds = Vec::new();
        let mut json_only = Vec::new();
        for def in self.inputs.types.values() {
            if !def.listable {
                continue;
            }
            if self.message_of(def).is_some() {
                kinds.push(def.path.clone());
                self.want(&def.path);
            } else {
                json_only.push(def.path.clone());
            }
        }
        for path in extra {
            self.want(path);
        }
        while let Some(path) = self.queue.pop() {
            self.strukt(&path);
        }
        if self.needs_schema_props {
            self.schema_props_unions();
        }
        if !self.errors.is_empty() {
            return Err(self.errors);
        }
        let mut head = String::new();
        let _ = writeln!(
            head,
            "/// The built-in kinds decoded from protobuf ({} kinds).",
            kinds.len()
        );
        head.push_str("pub(crate) fn codec<K: 'static>() -> Option<Codec<K>> {\n    let t = TypeId::of::<K>();\n");
        for path in &kinds {
            let _ = writeln!(
                head,
                "    if t == TypeId::of::<{path}>() {{ return pick::<K, {path}>(d_{}); }}",
                ident(path)
            );
        }
        head.push_str("    None\n}\n\n");
        if !json_only.is_empty() {
            let _ = writeln!(
                head,
                "// Listable kinds without a protobuf message (read as JSON): {}\n",
                json_only.join(", ")
            );
        }
        let _ = writeln!(
            head,
            "/// The kinds decoded from protobuf, by Rust path.\n#[cfg(test)]\npub(crate) const KINDS: &[&str] = &[\n{}];\n",
            kinds
                .iter()
                .map(|p| format!("    {p:?},\n"))
                .collect::<String>()
        );
        Ok(head + &self.out)
    }

    /// `d_<T>` and `m_<T>` for the struct at `path`.
    fn strukt(&mut self, path: &str) {
        let Some(def) = self.inputs.types.get(path) else {
            self.errors.push(format!("{path}: not a k8s-openapi type"));
            return;
        };
        let Shape::Struct {
            fields, default, ..
        } = &def.shape
        else {
            self.errors
                .push(format!("{path}: not a struct and no hand mapping"));
            return;
        };
        let Some(msg) = self.message_of(def) else {
            self.errors.push(format!(
                "{path}: no protobuf message {}",
                message_name(&def.definition)
            ));
            return;
        };
        let id = ident(path);
        let mut covered = BTreeMap::new();
        let mut funcs = String::new();
        self.merge(def, msg, &format!("m_{id}"), &mut covered, &mut funcs);
        let missing: Vec<_> = fields
            .iter()
            .filter(|f| !covered.contains_key(&f.name))
            .map(|f| f.name.as_str())
            .collect();
        if !missing.is_empty() {
            self.errors.push(format!(
                "{path}: fields without a protobuf field: {}",
                missing.join(", ")
            ));
        }
        // The value before any field is read: what JSON shows for a field
        // the server did not send.
        let mut init = String::new();
        let overrides: Vec<_> = fields
            .iter()
            .filter_map(|f| covered.get(&f.name).and_then(|o| o.clone()).map(|e| (f, e)))
            .collect();
        if *default {
            let _ = write!(init, "{path} {{ ");
            for (f, e) in &overrides {
                let _ = write!(init, "{}: {e}, ", f.name);
            }
            init.push_str("..Default::default() }");
            if overrides.is_empty() {
                init = format!("{path}::default()");
            }
        } else {
            let _ = write!(init, "{path} {{ ");
            for f in fields {
                let e = match (&f.ty, covered.get(&f.name).and_then(|o| o.clone())) {
                    (_, Some(e)) => e,
                    (RType::Named(n), _) if n == &format!("{META}Time") => {
                        format!("{META}Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)")
                    }
                    (RType::Named(n), _) if n == &format!("{META}MicroTime") => {
                        format!("{META}MicroTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)")
                    }
                    _ => "Default::default()".to_owned(),
                };
                let _ = write!(init, "{}: {e}, ", f.name);
            }
            init.push('}');
        }
        let _ = write!(
            self.out,
            "pub(super) fn d_{id}(b: &[u8], d: Decode) -> R<{path}> {{\n    let mut o = {init};\n    m_{id}(b, &mut o, d)?;\n    Ok(o)\n}}\n\n{funcs}"
        );
    }

    /// The function `name` merging the fields of `msg` into `def`'s
    /// struct; records in `covered` each Rust field set, with its initial
    /// value when it is not the default.
    fn merge(
        &mut self,
        def: &RTypeDef,
        msg: &Message,
        name: &str,
        covered: &mut BTreeMap<String, Option<String>>,
        funcs: &mut String,
    ) {
        let Shape::Struct { fields, json, .. } = &def.shape else {
            return;
        };
        let go = self.inputs.go.get(&msg.package);
        let mut arms = String::new();
        // the repeated fields' spare room, given back once the message is read
        let mut fits = String::new();
        for f in &msg.fields {
            let ctx = format!("{}.{}", msg.name, f.name);
            let g = match self.go_field(go, &msg.name, f) {
                Ok(g) => g,
                Err(e) => {
                    self.errors.push(format!("{ctx}: {e}"));
                    continue;
                }
            };
            if g.inline {
                let Some(inner) = self.inputs.messages.get(&f.ty) else {
                    self.errors.push(format!(
                        "{ctx}: inlined field of a non-message type {}",
                        f.ty
                    ));
                    continue;
                };
                let inner_name = format!("{name}__{}", inner.name);
                let _ = writeln!(
                    arms,
                    "            {} => {inner_name}(w::bytes(v)?, o, d)?,",
                    f.number
                );
                self.merge(def, inner, &inner_name, covered, funcs);
                continue;
            }
            let Some(rust) = json.get(&g.json) else {
                self.errors.push(format!(
                    "{ctx}: JSON name {:?} is not a field of {}",
                    g.json, def.path
                ));
                continue;
            };
            let Some(rf) = fields.iter().find(|x| &x.name == rust) else {
                self.errors
                    .push(format!("{ctx}: {} has no field {rust}", def.path));
                continue;
            };
            match self.arm(&rf.name, &rf.ty, f, &g, &ctx) {
                Ok((stmt, init)) => {
                    if def.path == format!("{META}ObjectMeta") && rf.name == "managed_fields" {
                        let _ = writeln!(
                            arms,
                            "            {} if !d.managed_fields => {{}}",
                            f.number
                        );
                    }
                    let _ = writeln!(arms, "            {} => {{ {stmt} }}", f.number);
                    if f.label == Label::Repeated {
                        let _ = match &rf.ty {
                            RType::Opt(_) => writeln!(fits, "    w::fit_list(&mut o.{});", rf.name),
                            _ => writeln!(fits, "    w::fit(&mut o.{});", rf.name),
                        };
                    }
                    covered.insert(rf.name.clone(), init);
                }
                Err(e) => self.errors.push(e),
            }
        }
        let _ = write!(
            funcs,
            "fn {name}(mut b: &[u8], o: &mut {}, d: Decode) -> R<()> {{\n    let _ = d;\n    while !b.is_empty() {{\n        let (n, v) = w::next(&mut b)?;\n        match n {{\n{arms}            _ => {{}}\n        }}\n    }}\n{fits}    Ok(())\n}}\n\n",
            def.path
        );
    }

    /// What the Go struct `strukt` (of package `go`) says of field `f`:
    /// by its protobuf name, else by its number; for `type X other.Y`,
    /// what every Go struct named `Y` says, if they agree.
    fn go_field(
        &self,
        go: Option<&GoPackage>,
        strukt: &str,
        f: &crate::proto::Field,
    ) -> Result<GoField, String> {
        let lookup = |p: &GoPackage, s: &str| {
            p.fields
                .get(&(s.to_owned(), f.name.clone()))
                .or_else(|| p.fields.get(&(s.to_owned(), format!("#{}", f.number))))
                .cloned()
        };
        let go = go.ok_or("no Go package")?;
        if let Some(g) = lookup(go, strukt) {
            return Ok(g);
        }
        let other = go
            .aliases
            .get(strukt)
            .ok_or("no Go field with this protobuf name or number")?;
        let found: Vec<GoField> = self
            .inputs
            .go
            .values()
            .filter_map(|p| lookup(p, other))
            .collect();
        match found.split_first() {
            Some((g, rest)) if rest.iter().all(|r| r == g) => Ok(g.clone()),
            Some(_) => Err(format!("Go structs named {other} disagree")),
            None => Err(format!("no Go field in {other} (aliased)")),
        }
    }

    /// The statement decoding one field into `o.<name>`, and the field's
    /// initial value when it is not the default.
    fn arm(
        &mut self,
        name: &str,
        ty: &RType,
        f: &crate::proto::Field,
        g: &GoField,
        ctx: &str,
    ) -> Result<(String, Option<String>), String> {
        let target = format!("o.{name}");
        match f.label {
            Label::Optional => {
                let (inner, optional) = match ty {
                    RType::Opt(t) => (t.as_ref(), true),
                    t => (t, false),
                };
                let (inner, boxed) = match inner {
                    RType::Boxed(t) => (t.as_ref(), true),
                    t => (t, false),
                };
                let e = self.elem(inner, &f.ty, ctx)?;
                let expr = if boxed {
                    format!("Box::new({})", e.expr)
                } else {
                    e.expr.clone()
                };
                if !optional {
                    return Ok((
                        if e.nullable {
                            format!("if let Some(x) = {expr} {{ {target} = x; }}")
                        } else {
                            format!("{target} = {expr};")
                        },
                        None,
                    ));
                }
                let stmt = if e.nullable {
                    format!("{target} = {expr};")
                } else if e.scalar && !g.pointer && g.omitempty {
                    format!("{target} = w::non_zero({expr});")
                } else if e.null_value {
                    format!("{target} = w::unless_null({expr});")
                } else {
                    format!("{target} = Some({expr});")
                };
                // What JSON shows when the field is not on the wire: a Go
                // value (not a pointer) is shown unless omitempty leaves its
                // zero out; a struct is always shown.
                let init = (!g.pointer
                    && !e.nullable
                    && e.default
                    && (e.always_shown || (e.scalar && !g.omitempty)))
                    .then(|| "Some(Default::default())".to_owned());
                Ok((stmt, init))
            }
            Label::Repeated => {
                let (list, push, elem_ty) = match ty {
                    RType::Opt(t) => match t.as_ref() {
                        RType::Vec(e) => (
                            format!("w::list(&mut {target})"),
                            format!("w::list(&mut {target})"),
                            e.as_ref(),
                        ),
                        _ => return Err(format!("{ctx}: repeated, but {name} is not a list")),
                    },
                    RType::Vec(e) => (format!("&mut {target}"), target.clone(), e.as_ref()),
                    _ => return Err(format!("{ctx}: repeated, but {name} is not a list")),
                };
                let e = self.elem(elem_ty, &f.ty, ctx)?;
                if let Some(packed) = e.packed {
                    return Ok((
                        format!(
                            "w::repeated(v, w::Packed::{packed}, {}, {list})?;",
                            e.expr.trim_end_matches("(v)?")
                        ),
                        None,
                    ));
                }
                let value = if e.nullable {
                    format!("w::required({}, {ctx:?})?", e.expr)
                } else {
                    e.expr
                };
                Ok((format!("{push}.push({value});"), None))
            }
            Label::Map => {
                let (map, value_ty) = match ty {
                    RType::Opt(t) => match t.as_ref() {
                        RType::Map(e) => (format!("w::map(&mut {target})"), e.as_ref()),
                        _ => return Err(format!("{ctx}: a map, but {name} is not one")),
                    },
                    RType::Map(e) => (target.clone(), e.as_ref()),
                    _ => return Err(format!("{ctx}: a map, but {name} is not one")),
                };
                let e = self.elem(value_ty, &f.ty, ctx)?;
                let value = if e.nullable {
                    format!("w::required({}, {ctx:?})?", e.expr)
                } else {
                    e.expr
                };
                let absent = if e.default {
                    "Default::default()".to_owned()
                } else {
                    format!("return Err(w::missing({ctx:?}))")
                };
                Ok((
                    format!(
                        "let (k, v) = w::entry(v)?; let x = match v {{ Some(v) => {value}, None => {absent} }}; {map}.insert(k, x);"
                    ),
                    None,
                ))
            }
        }
    }

    /// How one value of Rust type `ty` is read from a field of protobuf
    /// type `proto`.
    fn elem(&mut self, ty: &RType, proto: &str, ctx: &str) -> Result<Elem, String> {
        let scalar = |expr: &str, packed: Option<&'static str>| Elem {
            packed,
            scalar: true,
            ..Elem::plain(expr.to_owned())
        };
        let mismatch = || format!("{ctx}: protobuf {proto} cannot become {ty:?}");
        match (ty, proto) {
            (RType::String, "string") => Ok(scalar("w::string(v)?", None)),
            (RType::ByteString, "bytes") => Ok(scalar("w::byte_string(v)?", None)),
            (RType::Bool, "bool") => Ok(scalar("w::bool(v)?", Some("Varint"))),
            (RType::I32, "int32") => Ok(scalar("w::i32(v)?", Some("Varint"))),
            (RType::I64, "int64") => Ok(scalar("w::i64(v)?", Some("Varint"))),
            // repeated doubles: none in the API, read unpacked (proto2's default)
            (RType::F64, "double") => Ok(scalar("w::f64(v)?", None)),
            (RType::Vec(inner), _) if **inner == RType::String => {
                // `ExtraValue`: a message around a list of strings
                let msg = self.inputs.messages.get(proto).ok_or_else(mismatch)?;
                match msg.fields.as_slice() {
                    [f] if f.number == 1 && f.label == Label::Repeated && f.ty == "string" => {
                        Ok(Elem::plain("w::strings(v)?".to_owned()))
                    }
                    _ => Err(mismatch()),
                }
            }
            (RType::Named(path), _) => self.named(path, proto, ctx),
            _ => Err(mismatch()),
        }
    }

    fn named(&mut self, path: &str, proto: &str, ctx: &str) -> Result<Elem, String> {
        let def = self
            .inputs
            .types
            .get(path)
            .ok_or_else(|| format!("{ctx}: unknown type {path}"))?;
        let expected = message_name(&def.definition);
        if expected != proto {
            return Err(format!(
                "{ctx}: protobuf type {proto} but k8s-openapi type {path} ({expected})"
            ));
        }
        let special = |expr: &str, nullable: bool, null_value: bool, default: bool| Elem {
            nullable,
            null_value,
            default,
            ..Elem::plain(expr.to_owned())
        };
        if let Some(name) = path.strip_prefix(META) {
            match name {
                "Time" => return Ok(special("w::time(v)?", true, false, false)),
                "MicroTime" => return Ok(special("w::micro_time(v)?", true, false, false)),
                "FieldsV1" => return Ok(special("w::fields_v1(v)?", false, true, true)),
                _ => {}
            }
        }
        match path {
            "k8s_openapi::apimachinery::pkg::api::resource::Quantity" => {
                return Ok(special("w::quantity(v)?", false, false, true));
            }
            "k8s_openapi::apimachinery::pkg::util::intstr::IntOrString" => {
                return Ok(Elem {
                    always_shown: true,
                    ..special("w::int_or_string(v)?", false, false, true)
                });
            }
            "k8s_openapi::apimachinery::pkg::runtime::RawExtension" => {
                return Ok(special("w::raw_extension(v)?", false, true, true));
            }
            _ => {}
        }
        if let Some(name) = path.strip_prefix(APIEXT) {
            let union = match name {
                "JSON" => return Ok(special("w::json(v)?", false, true, true)),
                "JSONSchemaPropsOrArray" => "json_schema_props_or_array",
                "JSONSchemaPropsOrBool" => "json_schema_props_or_bool",
                "JSONSchemaPropsOrStringArray" => "json_schema_props_or_string_array",
                _ => "",
            };
            if !union.is_empty() {
                self.needs_schema_props = true;
                self.want(&format!("{APIEXT}JSONSchemaProps"));
                return Ok(special(&format!("{union}(v, d)?"), true, false, false));
            }
        }
        match &def.shape {
            Shape::Struct { default, .. } => {
                self.want(path);
                Ok(Elem {
                    default: *default,
                    always_shown: true,
                    ..Elem::plain(format!("d_{}(w::bytes(v)?, d)?", ident(path)))
                })
            }
            Shape::Special => {
                // A type JSON shows as an empty object, whose message has
                // no fields (`CustomResourceSubresourceStatus`).
                let empty = self
                    .inputs
                    .messages
                    .get(proto)
                    .is_some_and(|m| m.fields.is_empty());
                if empty {
                    Ok(Elem::plain(format!("{path}(w::empty_object(v)?)")))
                } else {
                    Err(format!("{ctx}: no mapping from {proto} to {path}"))
                }
            }
        }
    }

    /// The three `JSONSchemaPropsOr*` unions, after checking their
    /// messages are still the ones these functions read.
    fn schema_props_unions(&mut self) {
        let pkg = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1";
        let props = format!("{pkg}.JSONSchemaProps");
        for (name, expect) in [
            (
                "JSONSchemaPropsOrArray",
                [(1, &*props, Label::Optional), (2, &*props, Label::Repeated)],
            ),
            (
                "JSONSchemaPropsOrBool",
                [(1, "bool", Label::Optional), (2, &*props, Label::Optional)],
            ),
            (
                "JSONSchemaPropsOrStringArray",
                [
                    (1, &*props, Label::Optional),
                    (2, "string", Label::Repeated),
                ],
            ),
        ] {
            let ok = self
                .inputs
                .messages
                .get(&format!("{pkg}.{name}"))
                .is_some_and(|m| {
                    m.fields.len() == 2
                        && m.fields
                            .iter()
                            .zip(&expect)
                            .all(|(f, (n, t, l))| f.number == *n && f.ty == *t && f.label == *l)
                });
            if !ok {
                self.errors.push(format!(
                    "{name}: its message changed; update its hand mapping"
                ));
            }
        }
        let p = format!("{APIEXT}JSONSchemaProps");
        let d = format!("d_{}", ident(&p));
        let _ = write!(
            self.out,
            r#"/// `JSONSchemaPropsOrArray`: the list when it has items, else the schema.
fn json_schema_props_or_array(v: w::Value<'_>, d: Decode) -> R<Option<{APIEXT}JSONSchemaPropsOrArray>> {{
    let mut b = w::bytes(v)?;
    let (mut schema, mut schemas) = (None, Vec::new());
    while !b.is_empty() {{
        match w::next(&mut b)? {{
            (1, v) => schema = Some({d}(w::bytes(v)?, d)?),
            (2, v) => schemas.push({d}(w::bytes(v)?, d)?),
            _ => {{}}
        }}
    }}
    Ok(if schemas.is_empty() {{
        schema.map(|s| {APIEXT}JSONSchemaPropsOrArray::Schema(Box::new(s)))
    }} else {{
        Some({APIEXT}JSONSchemaPropsOrArray::Schemas(schemas))
    }})
}}

/// `JSONSchemaPropsOrBool`: the schema when there is one, else the bool.
fn json_schema_props_or_bool(v: w::Value<'_>, d: Decode) -> R<Option<{APIEXT}JSONSchemaPropsOrBool>> {{
    let mut b = w::bytes(v)?;
    let (mut allows, mut schema) = (false, None);
    while !b.is_empty() {{
        match w::next(&mut b)? {{
            (1, v) => allows = w::bool(v)?,
            (2, v) => schema = Some({d}(w::bytes(v)?, d)?),
            _ => {{}}
        }}
    }}
    Ok(Some(match schema {{
        Some(s) => {APIEXT}JSONSchemaPropsOrBool::Schema(Box::new(s)),
        None => {APIEXT}JSONSchemaPropsOrBool::Bool(allows),
    }}))
}}

/// `JSONSchemaPropsOrStringArray`: the strings when there are some, else
/// the schema.
fn json_schema_props_or_string_array(v: w::Value<'_>, d: Decode) -> R<Option<{APIEXT}JSONSchemaPropsOrStringArray>> {{
    let mut b = w::bytes(v)?;
    let (mut schema, mut strings) = (None, Vec::new());
    while !b.is_empty() {{
        match w::next(&mut b)? {{
            (1, v) => schema = Some({d}(w::bytes(v)?, d)?),
            (2, v) => strings.push(w::string(v)?),
            _ => {{}}
        }}
    }}
    Ok(if strings.is_empty() {{
        schema.map(|s| {APIEXT}JSONSchemaPropsOrStringArray::Schema(Box::new(s)))
    }} else {{
        Some({APIEXT}JSONSchemaPropsOrStringArray::Strings(strings))
    }})
}}

"#
        );
    }
}

/// Emits the whole file: header, imports, body.
pub fn file(body: &str, sources: &str) -> String {
    format!(
        "// @generated by tools/protobuf-gen (`make generate`) from {sources}.\n\
         // Do not edit: change the generator and run it again.\n\
         //\n\
         //! Decoders from the Kubernetes protobuf wire format straight into the\n\
         //! k8s-openapi types, one per struct a built-in kind reaches.\n\n\
         #![allow(non_snake_case, clippy::all, clippy::pedantic, missing_docs)]\n\n\
         use std::any::TypeId;\n\n\
         use super::{{codec::{{Codec, Decode}}, wire::{{self as w, pick, R}}}};\n\n\
         {body}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        gotypes::GoPackage,
        openapi::RField,
        proto::{Field, Message},
    };

    /// A field without a Go counterpart and a k8s-openapi field without a
    /// protobuf one are both errors, named; nothing is dropped silently.
    #[test]
    fn unmapped_fields_fail_the_generator_by_name() {
        let pkg = "k8s.io.api.core.v1";
        let field = |name: &str, number| Field {
            name: name.into(),
            number,
            label: Label::Optional,
            ty: "string".into(),
        };
        let message = Message {
            package: pkg.into(),
            name: "Thing".into(),
            fields: vec![field("color", 1), field("size", 2)],
        };
        let mut go = GoPackage::default();
        go.fields.insert(
            ("Thing".into(), "color".into()),
            GoField {
                json: "color".into(),
                omitempty: true,
                ..GoField::default()
            },
        );
        let path = "k8s_openapi::api::core::v1::Thing".to_owned();
        let rfield = |name: &str| RField {
            name: name.into(),
            ty: RType::Opt(Box::new(RType::String)),
        };
        let def = RTypeDef {
            definition: "io.k8s.api.core.v1.Thing".into(),
            path: path.clone(),
            shape: Shape::Struct {
                fields: vec![rfield("color"), rfield("weight")],
                json: [("color", "color"), ("weight", "weight")]
                    .map(|(j, r)| (j.to_owned(), r.to_owned()))
                    .into(),
                default: true,
            },
            listable: true,
        };
        let inputs = Inputs {
            messages: [(format!("{pkg}.Thing"), message)].into(),
            go: [(pkg.to_owned(), go)].into(),
            types: [(path, def)].into(),
        };
        let errors = Gen::new(&inputs).run(&[]).expect_err("unmapped fields");
        assert!(
            errors.iter().any(|e| e.starts_with("Thing.size:")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.ends_with("fields without a protobuf field: weight")),
            "{errors:?}"
        );
    }
}

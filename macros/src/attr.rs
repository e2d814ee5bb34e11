//! Parsing `#[controller(...)]` into a [`Declaration`], with errors that
//! point at the offending tokens.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Ident, LitInt, LitStr, Token, Type, parenthesized};

/// The options `#[controller(...)]` accepts, for error messages.
const OPTIONS: &str = "`for = Kind` (or `for(Kind, predicates(..))`), `owns(Kind, ..)` (or `owns(Kind, project = View)`), \
     `watches(Kind, map = function)` (or `by_index = \"index\"`), `index(Kind, \"name\", function)`, \
     `reads(Kind, ..)`, `event_filter(expr, ..)`, \
     `rbac(verb, .. on Kind, ..)`, `status`, `finalizer`, `events`, `name = \"..\"`, `field_manager = \"..\"`, \
     `max_concurrent_reconciles = N`, `throttle(per_second = N, burst = N)`, `multicluster`, \
     `watches_hub(Kind, map = function)`, `watches_members(Kind, map = function)`";

/// The verbs `rbac(...)` accepts, as RBAC spells them, with the
/// `opkit::rbac::Verb` variant for each.
pub(crate) const VERBS: &[(&str, &str)] = &[
    ("get", "Get"),
    ("list", "List"),
    ("watch", "Watch"),
    ("create", "Create"),
    ("update", "Update"),
    ("patch", "Patch"),
    ("delete", "Delete"),
    ("deletecollection", "DeleteCollection"),
];

/// How a mapped watch finds the requests for a changed object.
pub(crate) enum WatchMap {
    /// `map = function`: `function(&Kind, &Store<Primary>) -> Vec<Request>`.
    Function(Expr),
    /// `by_index = "index"`: the primaries whose index lists the object.
    ByIndex(LitStr),
}

/// A mapped watch: `watches(Kind, map = function, predicates(..))`.
pub(crate) struct Watch {
    pub kind: Type,
    pub map: WatchMap,
    pub predicates: Vec<Expr>,
}

/// A watch across the fleet: `watches_hub(Kind, map = function)` (hub
/// objects to requests in members) or `watches_members(Kind, map =
/// function)` (members' objects to the hub controller's requests).
pub(crate) struct FleetWatch {
    pub kind: Type,
    pub map: Expr,
    /// The option's name, which is also the builder method it calls;
    /// where the errors about it point.
    pub option: Ident,
}

/// An index: `index(Kind, "name", function)`.
pub(crate) struct IndexDecl {
    pub kind: Type,
    pub name: LitStr,
    pub values: Expr,
}

/// Owned kinds: `owns(Kind, .., metadata, predicates(..))` or
/// `owns(Kind, project = View, predicates(..))`; the options apply to every
/// kind of the clause.
pub(crate) struct Owns {
    pub kinds: Vec<Type>,
    pub metadata: bool,
    /// `project = View`: the kind is cached as `Projected<Kind, View>`.
    pub project: Option<Type>,
    pub predicates: Vec<Expr>,
}

/// What an `rbac(...)` clause grants its verbs on.
pub(crate) enum Target {
    /// A Rust type implementing `kube::Resource`.
    Kind(Type),
    /// `"resource[.group][/subresource]"`, kubectl's notation (checked
    /// against the built-in resources unless written `unchecked("..")`).
    Resource {
        group: String,
        resource: String,
        span: Span,
    },
}

/// One `rbac(verbs on targets)` clause.
pub(crate) struct RbacClause {
    /// `opkit::rbac::Verb` variant names, with the span of each verb.
    pub verbs: Vec<(&'static str, Span)>,
    pub targets: Vec<Target>,
}

/// Everything `#[controller(...)]` attributes declare.
#[derive(Default)]
pub(crate) struct Declaration {
    pub primary: Option<Type>,
    pub primary_predicates: Vec<Expr>,
    pub owns: Vec<Owns>,
    pub watches: Vec<Watch>,
    pub indexes: Vec<IndexDecl>,
    pub reads: Vec<Type>,
    pub event_filters: Vec<Expr>,
    pub rbac: Vec<RbacClause>,
    pub status: bool,
    pub finalizer: bool,
    pub events: bool,
    pub name: Option<LitStr>,
    pub field_manager: Option<LitStr>,
    pub max_concurrent_reconciles: Option<LitInt>,
    pub throttle: Option<(LitInt, LitInt)>,
    /// `multicluster`: where it was written (the generated call's span).
    pub multicluster: Option<Span>,
    /// `watches_hub(..)` (for a multicluster controller only) and
    /// `watches_members(..)` (for a hub controller only).
    pub fleet_watches: Vec<FleetWatch>,
}

impl Declaration {
    /// Reads every `#[controller(...)]` attribute of the derive input.
    /// `fallback` is where a missing `for` is reported when there is no
    /// attribute at all.
    pub(crate) fn from_attributes(attrs: &[Attribute], fallback: Span) -> syn::Result<Self> {
        let mut decl = Self::default();
        let mut last = None;
        for attr in attrs.iter().filter(|a| a.path().is_ident("controller")) {
            last = Some(attr);
            if matches!(attr.meta, syn::Meta::Path(_)) {
                return Err(syn::Error::new_spanned(
                    attr,
                    "`#[controller]` needs options: `#[controller(for = Kind, ..)]`",
                ));
            }
            attr.parse_nested_meta(|meta| decl.option(meta))?;
        }
        if decl.primary.is_none() {
            let message = "missing `for = Kind`: the kind this controller reconciles, \
                 e.g. `#[controller(for = Memcached, owns(Deployment))]`";
            return Err(match last {
                Some(attr) => syn::Error::new_spanned(attr, message),
                None => syn::Error::new(
                    fallback,
                    "`#[derive(Controller)]` needs a `#[controller(for = Kind, ..)]` attribute \
                     naming the kind this controller reconciles",
                ),
            });
        }
        decl.check_fleet_watches()?;
        Ok(decl)
    }

    /// A hub watch needs `multicluster` (it queues requests in members); a
    /// member watch refuses it (its requests are the hub controller's).
    fn check_fleet_watches(&self) -> syn::Result<()> {
        let first = |option: &str| self.fleet_watches.iter().find(|w| w.option == option);
        if self.multicluster.is_none()
            && let Some(watch) = first("watches_hub")
        {
            return Err(syn::Error::new_spanned(
                &watch.option,
                "`watches_hub(..)` maps hub objects to requests in member clusters: it needs \
                 `multicluster` (a controller that runs in every member); a hub controller \
                 watches hub objects with `watches(..)`",
            ));
        }
        if self.multicluster.is_some()
            && let Some(watch) = first("watches_members")
        {
            return Err(syn::Error::new_spanned(
                &watch.option,
                "`watches_members(..)` maps the members' objects to a hub controller's requests: \
                 it belongs on a controller without `multicluster`; a multicluster controller \
                 watches its own member with `owns(..)` or `watches(..)`",
            ));
        }
        Ok(())
    }

    fn option(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
        let path = &meta.path;
        let key = path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "for" => {
                if self.primary.is_some() {
                    return Err(meta.error(
                        "`for` is given twice: a controller reconciles one kind; \
                         watch others with `owns(..)` or `watches(..)`",
                    ));
                }
                if meta.input.peek(syn::token::Paren) {
                    let content;
                    parenthesized!(content in meta.input);
                    let items = parse_kinds_with_options(&content, path.span(), "for")?;
                    if items.kinds.len() != 1 || items.metadata {
                        return Err(syn::Error::new_spanned(
                            path,
                            "expected `for(Kind, predicates(..))`: one kind, optionally with predicates",
                        ));
                    }
                    self.primary = items.kinds.into_iter().next();
                    self.primary_predicates = items.predicates;
                } else {
                    let value = meta
                        .value()
                        .map_err(|_| syn::Error::new_spanned(path, "expected `for = Kind`"))?;
                    self.primary = Some(value.parse()?);
                }
            }
            "owns" => {
                let content;
                parenthesized!(content in meta.input);
                self.owns
                    .push(parse_kinds_with_options(&content, path.span(), "owns")?);
            }
            "watches" => {
                let content;
                parenthesized!(content in meta.input);
                self.watches.push(parse_watch(&content, path.span())?);
            }
            "watches_hub" | "watches_members" => {
                let content;
                parenthesized!(content in meta.input);
                let option = path
                    .get_ident()
                    .cloned()
                    .ok_or_else(|| meta.error("expected an option"))?;
                self.fleet_watches
                    .push(parse_fleet_watch(&content, option)?);
            }
            "index" => {
                let content;
                parenthesized!(content in meta.input);
                self.indexes.push(parse_index(&content, path.span())?);
            }
            "reads" => {
                let content;
                parenthesized!(content in meta.input);
                let kinds = Punctuated::<Type, Token![,]>::parse_terminated(&content)?;
                if kinds.is_empty() {
                    return Err(meta.error(
                        "`reads()` is empty: name the kinds the reconciler reads, e.g. `reads(Secret)`",
                    ));
                }
                self.reads.extend(kinds);
            }
            "event_filter" => {
                let content;
                parenthesized!(content in meta.input);
                let exprs = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?;
                self.event_filters.extend(exprs);
            }
            "predicates" => {
                return Err(meta.error(
                    "predicates belong to a watch: `for(Kind, predicates(..))`, \
                     `owns(Kind, predicates(..))` or `watches(Kind, map = f, predicates(..))`; \
                     a filter for every watch is `event_filter(..)`",
                ));
            }
            "rbac" => {
                let content;
                parenthesized!(content in meta.input);
                self.rbac.push(content.parse()?);
            }
            "status" => self.status = flag(&meta, "status")?,
            "finalizer" => self.finalizer = flag(&meta, "finalizer")?,
            "events" => self.events = flag(&meta, "events")?,
            "multicluster" => {
                if flag(&meta, "multicluster")? {
                    self.multicluster = Some(path.span());
                }
            }
            "name" => {
                if self.name.is_some() {
                    return Err(meta.error("`name` is given twice"));
                }
                self.name = Some(non_empty(&meta, "the controller name must not be empty")?);
            }
            "field_manager" => {
                if self.field_manager.is_some() {
                    return Err(meta.error("`field_manager` is given twice"));
                }
                self.field_manager = Some(non_empty(&meta, "the field manager must not be empty")?);
            }
            "max_concurrent_reconciles" => {
                if self.max_concurrent_reconciles.is_some() {
                    return Err(meta.error("`max_concurrent_reconciles` is given twice"));
                }
                let lit: LitInt = meta.value()?.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "expected an integer: `max_concurrent_reconciles = 4`",
                    )
                })?;
                if lit.base10_parse::<usize>()? == 0 {
                    return Err(syn::Error::new_spanned(
                        lit,
                        "`max_concurrent_reconciles` must be at least 1",
                    ));
                }
                self.max_concurrent_reconciles = Some(lit);
            }
            "throttle" => {
                let mut per_second = None;
                let mut burst = None;
                meta.parse_nested_meta(|inner| {
                    let slot = if inner.path.is_ident("per_second") {
                        &mut per_second
                    } else if inner.path.is_ident("burst") {
                        &mut burst
                    } else {
                        return Err(inner.error("expected `per_second = N` or `burst = N`"));
                    };
                    let lit: LitInt = inner.value()?.parse()?;
                    if lit.base10_parse::<u32>()? == 0 {
                        return Err(syn::Error::new_spanned(lit, "must be at least 1"));
                    }
                    *slot = Some(lit);
                    Ok(())
                })?;
                match (per_second, burst) {
                    (Some(p), Some(b)) => self.throttle = Some((p, b)),
                    _ => {
                        return Err(syn::Error::new_spanned(
                            path,
                            "expected `throttle(per_second = N, burst = N)`",
                        ));
                    }
                }
            }
            _ => {
                let shown = path
                    .get_ident()
                    .map_or_else(|| "this".to_owned(), |i| format!("`{i}`"));
                return Err(syn::Error::new_spanned(
                    path,
                    format!("unknown controller option {shown}; expected one of {OPTIONS}"),
                ));
            }
        }
        Ok(())
    }
}

/// The string of `option = "value"`, which must not be empty.
fn non_empty(meta: &syn::meta::ParseNestedMeta<'_>, empty: &str) -> syn::Result<LitStr> {
    let lit: LitStr = meta.value()?.parse()?;
    if lit.value().is_empty() {
        return Err(syn::Error::new_spanned(lit, empty));
    }
    Ok(lit)
}

/// A bare flag: `finalizer`, not `finalizer = ..` or `finalizer(..)`.
fn flag(meta: &syn::meta::ParseNestedMeta<'_>, name: &str) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        return Err(meta.error(format!("`{name}` takes no value: write just `{name}`")));
    }
    Ok(true)
}

/// `Kind, "name", function`.
fn parse_index(content: ParseStream<'_>, span: Span) -> syn::Result<IndexDecl> {
    const EXPECTED: &str = "expected `index(Kind, \"name\", function)` with \
         `fn function(object: &Kind) -> Vec<String>`";
    if content.is_empty() {
        return Err(syn::Error::new(span, EXPECTED));
    }
    let kind: Type = content.parse()?;
    content
        .parse::<Token![,]>()
        .map_err(|e| syn::Error::new(e.span(), EXPECTED))?;
    let name: LitStr = content
        .parse()
        .map_err(|e| syn::Error::new(e.span(), EXPECTED))?;
    if name.value().is_empty() {
        return Err(syn::Error::new_spanned(
            name,
            "the index name must not be empty",
        ));
    }
    content
        .parse::<Token![,]>()
        .map_err(|e| syn::Error::new(e.span(), EXPECTED))?;
    let values: Expr = content.parse()?;
    if !content.is_empty() {
        content.parse::<Token![,]>()?;
    }
    if !content.is_empty() {
        return Err(content.error("unexpected tokens after the index function"));
    }
    Ok(IndexDecl { kind, name, values })
}

/// `Kind, map = function`.
fn parse_watch(content: ParseStream<'_>, span: Span) -> syn::Result<Watch> {
    if content.is_empty() {
        return Err(syn::Error::new(
            span,
            "expected `watches(Kind, map = function)`",
        ));
    }
    let kind: Type = content.parse()?;
    if content.is_empty() {
        return Err(syn::Error::new_spanned(
            &kind,
            "a watch needs a mapper: `watches(Kind, map = function)` with \
             `fn function(object: &Kind, primaries: &opkit::cache::Store<Primary>) -> Vec<opkit::reconcile::Request>`, \
             or `watches(Kind, by_index = \"index\")`",
        ));
    }
    content.parse::<Token![,]>()?;
    let key: Ident = content.call(Ident::parse_any)?;
    let map = if key == "map" {
        content.parse::<Token![=]>()?;
        WatchMap::Function(content.parse()?)
    } else if key == "by_index" {
        content.parse::<Token![=]>()?;
        WatchMap::ByIndex(content.parse().map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected the index name: `by_index = \"settings\"`",
            )
        })?)
    } else {
        return Err(syn::Error::new_spanned(
            key,
            "expected `map = function` or `by_index = \"index\"` after the watched kind",
        ));
    };
    let mut predicates = Vec::new();
    if !content.is_empty() {
        content.parse::<Token![,]>()?;
        if !content.is_empty() {
            let key: Ident = content.call(Ident::parse_any)?;
            if key != "predicates" || !content.peek(syn::token::Paren) {
                return Err(syn::Error::new_spanned(
                    key,
                    "expected `predicates(..)` after the mapper",
                ));
            }
            predicates = parse_predicates(content)?;
            if !content.is_empty() {
                content.parse::<Token![,]>()?;
            }
            if !content.is_empty() {
                return Err(content.error("unexpected tokens after `predicates(..)`"));
            }
        }
    }
    Ok(Watch {
        kind,
        map,
        predicates,
    })
}

/// `Kind, map = function` of `watches_hub(..)` or `watches_members(..)`.
fn parse_fleet_watch(content: ParseStream<'_>, option: Ident) -> syn::Result<FleetWatch> {
    let expected = if option == "watches_hub" {
        "expected `watches_hub(Kind, map = function)` with \
         `fn function(object: &Kind) -> Vec<opkit::multicluster::ClusterRequest>`"
    } else {
        "expected `watches_members(Kind, map = function)` with \
         `fn function(cluster: &opkit::multicluster::ClusterName, object: &Kind) -> Vec<opkit::reconcile::Request>`"
    };
    if content.is_empty() {
        return Err(syn::Error::new_spanned(&option, expected));
    }
    let kind: Type = content.parse()?;
    if content.is_empty() {
        return Err(syn::Error::new_spanned(&kind, expected));
    }
    content.parse::<Token![,]>()?;
    let key: Ident = content.call(Ident::parse_any)?;
    if key != "map" || !content.peek(Token![=]) {
        return Err(syn::Error::new_spanned(key, expected));
    }
    content.parse::<Token![=]>()?;
    let map: Expr = content.parse()?;
    if !content.is_empty() {
        content.parse::<Token![,]>()?;
    }
    if !content.is_empty() {
        return Err(content.error(
            "unexpected tokens after the mapper (the controller's `event_filter(..)` applies \
             to this watch)",
        ));
    }
    Ok(FleetWatch { kind, map, option })
}

/// `(expr, ..)` after `predicates`.
fn parse_predicates(content: ParseStream<'_>) -> syn::Result<Vec<Expr>> {
    let inner;
    parenthesized!(inner in content);
    let exprs = Punctuated::<Expr, Token![,]>::parse_terminated(&inner)?;
    if exprs.is_empty() {
        return Err(inner.error("`predicates()` is empty: name at least one predicate"));
    }
    Ok(exprs.into_iter().collect())
}

/// `Kind, Kind, metadata, predicates(..)`: kinds, then options for all of them.
fn parse_kinds_with_options(
    content: ParseStream<'_>,
    span: Span,
    clause: &str,
) -> syn::Result<Owns> {
    let mut owns = Owns {
        kinds: Vec::new(),
        metadata: false,
        project: None,
        predicates: Vec::new(),
    };
    while !content.is_empty() {
        let fork = content.fork();
        let option = fork.call(Ident::parse_any).ok();
        match option {
            Some(ident) if ident == "metadata" && (fork.is_empty() || fork.peek(Token![,])) => {
                content.call(Ident::parse_any)?;
                if clause != "owns" {
                    return Err(syn::Error::new_spanned(
                        ident,
                        "`metadata` applies to `owns(..)` only",
                    ));
                }
                owns.metadata = true;
            }
            Some(ident) if ident == "project" && fork.peek(Token![=]) => {
                content.call(Ident::parse_any)?;
                content.parse::<Token![=]>()?;
                if clause != "owns" {
                    return Err(syn::Error::new_spanned(
                        ident,
                        "`project = View` applies to `owns(..)` only",
                    ));
                }
                owns.project = Some(content.parse()?);
            }
            Some(ident) if ident == "predicates" && fork.peek(syn::token::Paren) => {
                content.call(Ident::parse_any)?;
                owns.predicates.extend(parse_predicates(content)?);
            }
            _ => {
                if !owns.predicates.is_empty() || owns.metadata || owns.project.is_some() {
                    return Err(content.error(
                        "kinds come first: write the options (`metadata`, `project = View`, \
                         `predicates(..)`) last",
                    ));
                }
                owns.kinds.push(content.parse()?);
            }
        }
        if !content.is_empty() {
            content.parse::<Token![,]>()?;
        }
    }
    if owns.kinds.is_empty() {
        return Err(syn::Error::new(
            span,
            format!("`{clause}()` names no kind, e.g. `{clause}(Deployment)`"),
        ));
    }
    if let Some(view) = &owns.project {
        if owns.metadata {
            return Err(syn::Error::new_spanned(
                view,
                "`project = View` and `metadata` exclude each other: a projection keeps the \
                 metadata essentials already",
            ));
        }
        if owns.kinds.len() != 1 {
            return Err(syn::Error::new_spanned(
                view,
                "`project = View` projects one kind: write `owns(Kind, project = View)` per kind",
            ));
        }
    }
    Ok(owns)
}

impl Parse for RbacClause {
    /// `verb, verb on Target, Target`.
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut verbs = Vec::new();
        loop {
            if input.is_empty() {
                return Err(input.error(
                    "expected `on` and the kinds, e.g. `rbac(create, patch on Deployment)`",
                ));
            }
            let ident: Ident = input.call(Ident::parse_any)?;
            if ident == "on" {
                if verbs.is_empty() {
                    return Err(syn::Error::new_spanned(
                        ident,
                        "expected verbs before `on`, e.g. `rbac(create, patch on Deployment)`",
                    ));
                }
                break;
            }
            let name = ident.to_string();
            let Some((_, variant)) = VERBS.iter().find(|(v, _)| *v == name) else {
                return Err(syn::Error::new_spanned(
                    ident,
                    format!(
                        "unknown RBAC verb `{name}`; expected one of {}",
                        VERBS.iter().map(|(v, _)| *v).collect::<Vec<_>>().join(", ")
                    ),
                ));
            };
            verbs.push((*variant, ident.span()));
            if input.peek(Token![,]) {
                input.parse::<Token![,]>()?;
            }
        }
        let targets = Punctuated::<Target, Token![,]>::parse_terminated(input)?;
        if targets.is_empty() {
            return Err(input.error("expected the kinds after `on`, e.g. `on Deployment, Service`"));
        }
        Ok(Self {
            verbs,
            targets: targets.into_iter().collect(),
        })
    }
}

impl Parse for Target {
    /// `Kind`, `"resource[.group][/subresource]"` (checked against the
    /// built-in resources) or `unchecked("...")` (taken as written).
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let unchecked = input.peek(Ident)
            && input.peek2(syn::token::Paren)
            && input
                .fork()
                .parse::<Ident>()
                .is_ok_and(|i| i == "unchecked");
        let lit: LitStr = if unchecked {
            input.parse::<Ident>()?;
            let content;
            parenthesized!(content in input);
            let lit: LitStr = content.parse().map_err(|e| {
                syn::Error::new(
                    e.span(),
                    "expected a string: `unchecked(\"widgets.example.com\")`",
                )
            })?;
            if !content.is_empty() {
                return Err(content.error("expected one string in `unchecked(..)`"));
            }
            lit
        } else if input.peek(LitStr) {
            input.parse()?
        } else {
            return Ok(Self::Kind(input.parse()?));
        };
        let (group, resource) = split_resource(&lit.value()).ok_or_else(|| {
            syn::Error::new_spanned(
                &lit,
                "expected `\"resource[.group][/subresource]\"`, e.g. \"pods/log\" or \"deployments.apps\"",
            )
        })?;
        if !unchecked {
            crate::resource_check::check(&lit.value())
                .map_err(|message| syn::Error::new_spanned(&lit, message))?;
        }
        Ok(Self::Resource {
            group,
            resource,
            span: lit.span(),
        })
    }
}

/// kubectl's `resource[.group][/subresource]` → (group, resource[/sub]).
fn split_resource(text: &str) -> Option<(String, String)> {
    let (main, sub) = match text.split_once('/') {
        Some((main, sub)) => (main, Some(sub)),
        None => (text, None),
    };
    let (plural, group) = main.split_once('.').unwrap_or((main, ""));
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    if !valid(plural) || (!group.is_empty() && !valid(group)) || sub.is_some_and(|s| !valid(s)) {
        return None;
    }
    let resource = match sub {
        Some(sub) => format!("{plural}/{sub}"),
        None => plural.to_owned(),
    };
    Some((group.to_owned(), resource))
}

//! Generating the `opkit::derive::ControllerWiring` impl from a
//! [`Declaration`].

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{DeriveInput, Ident};

use crate::attr::{Declaration, Target, WatchMap};

/// Several predicates of one watch as one (`a.and(b)...`); `None` for none.
fn combined(predicates: &[syn::Expr]) -> Option<TokenStream> {
    let (first, rest) = predicates.split_first()?;
    let mut all = quote_spanned! {first.span()=> #first };
    for next in rest {
        all = quote_spanned! {next.span()=> ::opkit::predicate::and(#all, #next) };
    }
    Some(all)
}

/// The `ControllerWiring` impl emitted beside the compile error of a
/// faulty `#[controller(...)]`: it never runs (the crate does not
/// compile), it only keeps the code that calls `add_to` or `rbac_rules`
/// from adding errors of its own.
pub(crate) fn placeholder(input: &DeriveInput) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        impl #impl_generics ::opkit::derive::ControllerWiring for #ident #ty_generics #where_clause {
            fn controller(self) -> ::opkit::controller::Controller<Self> {
                ::core::unreachable!("the #[controller(...)] attribute has an error")
            }

            fn rbac_rules() -> ::opkit::rbac::Rules {
                ::opkit::rbac::Rules::new()
            }
        }
    }
}

pub(crate) fn controller(input: &DeriveInput) -> syn::Result<TokenStream> {
    let decl = Declaration::from_attributes(&input.attrs, input.ident.span())?;
    let Some(primary) = &decl.primary else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "missing `for = Kind`",
        ));
    };
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();

    let primary_check = quote_spanned! {primary.span()=>
        ::opkit::derive::primary_kind_is::<Self, #primary>();
    };
    let primary_call = match combined(&decl.primary_predicates) {
        Some(predicate) => {
            quote_spanned! {primary.span()=> ::opkit::controller::Controller::<Self>::with_predicate(self, #predicate) }
        }
        None => {
            quote_spanned! {primary.span()=> ::opkit::controller::Controller::<Self>::new(self) }
        }
    };
    let indexes = decl.indexes.iter().map(|index| {
        let kind = &index.kind;
        let name = &index.name;
        let values = &index.values;
        let values =
            quote_spanned! {values.span()=> ::opkit::derive::index_values::<#kind, _>(#values) };
        quote_spanned! {kind.span()=> .index::<#kind>(#name, #values) }
    });
    let owns = decl.owns.iter().flat_map(|clause| {
        let predicate = combined(&clause.predicates);
        clause
            .kinds
            .iter()
            .map(move |kind| match (clause.metadata, &predicate) {
                _ if clause.project.is_some() => {
                    let view = &clause.project;
                    let projected =
                        quote_spanned! {kind.span()=> ::opkit::cache::Projected<#kind, #view> };
                    match &predicate {
                        None => quote_spanned! {kind.span()=> .owns_projected::<#kind, #view>() },
                        Some(p) => quote_spanned! {kind.span()=> .owns_with::<#projected>(#p) },
                    }
                }
                (false, None) => quote_spanned! {kind.span()=> .owns::<#kind>() },
                (false, Some(p)) => quote_spanned! {kind.span()=> .owns_with::<#kind>(#p) },
                (true, None) => quote_spanned! {kind.span()=> .owns_metadata::<#kind>() },
                (true, Some(p)) => {
                    quote_spanned! {kind.span()=> .owns_metadata_with::<#kind>(#p) }
                }
            })
    });
    let watches = decl.watches.iter().map(|watch| {
        let kind = &watch.kind;
        match &watch.map {
            WatchMap::Function(map) => {
                let map = quote_spanned! {map.span()=> ::opkit::derive::mapper::<#kind, #primary, _>(#map) };
                match combined(&watch.predicates) {
                    Some(p) => quote_spanned! {kind.span()=> .watches_with::<#kind>(#map, #p) },
                    None => quote_spanned! {kind.span()=> .watches::<#kind>(#map) },
                }
            }
            WatchMap::ByIndex(index) => match combined(&watch.predicates) {
                Some(p) => quote_spanned! {kind.span()=> .watches_by_index_with::<#kind>(#index, #p) },
                None => quote_spanned! {kind.span()=> .watches_by_index::<#kind>(#index) },
            },
        }
    });
    // `watches_hub::<Kind>(map)` or `watches_members::<Kind>(map)`: the
    // option names its builder method. Need opkit's `multicluster` feature,
    // as `multicluster` does.
    let fleet_watches = decl.fleet_watches.iter().map(|watch| {
        let (method, kind, map) = (&watch.option, &watch.kind, &watch.map);
        quote_spanned! {method.span()=> .#method::<#kind>(#map) }
    });
    let reads = decl.reads.iter().map(|kind| {
        quote_spanned! {kind.span()=> .reads::<#kind>() }
    });
    let event_filters = decl.event_filters.iter().map(|filter| {
        quote_spanned! {filter.span()=> .with_event_filter(#filter) }
    });
    let name = decl.name.as_ref().map(|name| quote! { .name(#name) });
    let field_manager = decl
        .field_manager
        .as_ref()
        .map(|manager| quote! { .field_manager(#manager) });
    let workers = decl
        .max_concurrent_reconciles
        .as_ref()
        .map(|n| quote! { .max_concurrent_reconciles(#n) });
    // Needs opkit's `multicluster` feature: without it, the error points here.
    let multicluster = decl
        .multicluster
        .map(|span| quote_spanned! {span=> .multicluster() });
    let throttle = decl.throttle.as_ref().map(|(per_second, burst)| {
        quote! { .throttle(::opkit::workqueue::Quota::per_second(#per_second).burst(#burst)) }
    });

    let read = quote! { &::opkit::rbac::Verb::READ };
    // Least privilege: read the primary kind; write its status only with
    // `status`; update its `finalizers` subresource (what adding a
    // finalizer, and setting `blockOwnerDeletion` in a child's controller
    // reference, need) only with `finalizer` or when it owns children.
    let mut rules = vec![quote_spanned! {primary.span()=> .allow::<#primary>(#read) }];
    if decl.status {
        rules.push(quote_spanned! {primary.span()=>
            .allow_subresource::<#primary>("status", &[
                ::opkit::rbac::Verb::Get, ::opkit::rbac::Verb::Update, ::opkit::rbac::Verb::Patch,
            ])
        });
    }
    if decl.finalizer || !decl.owns.is_empty() {
        rules.push(quote_spanned! {primary.span()=>
            .allow_subresource::<#primary>("finalizers", &[::opkit::rbac::Verb::Update])
        });
    }
    if decl.finalizer {
        rules.push(quote_spanned! {primary.span()=>
            .allow::<#primary>(&[::opkit::rbac::Verb::Update, ::opkit::rbac::Verb::Patch])
        });
    }
    if decl.events {
        rules.push(quote! { .events() });
    }
    for kind in decl
        .owns
        .iter()
        .flat_map(|clause| &clause.kinds)
        .chain(&decl.reads)
    {
        rules.push(quote_spanned! {kind.span()=> .allow::<#kind>(#read) });
    }
    for watch in &decl.watches {
        let kind = &watch.kind;
        rules.push(quote_spanned! {kind.span()=> .allow::<#kind>(#read) });
    }
    // A hub watch reads the hub; a member watch reads each member, whose
    // credentials are granted the same rules (the README of a generated
    // hub operator says so).
    for watch in &decl.fleet_watches {
        let kind = &watch.kind;
        rules.push(quote_spanned! {kind.span()=> .allow::<#kind>(#read) });
    }
    for clause in &decl.rbac {
        let verbs = clause.verbs.iter().map(|(variant, span)| {
            let variant = Ident::new(variant, *span);
            quote_spanned! {*span=> ::opkit::rbac::Verb::#variant }
        });
        let verbs = quote! { &[#(#verbs),*] };
        for target in &clause.targets {
            rules.push(match target {
                Target::Kind(kind) => quote_spanned! {kind.span()=> .allow::<#kind>(#verbs) },
                Target::Resource {
                    group,
                    resource,
                    span,
                } => quote_spanned! {*span=> .allow_resource(#group, #resource, #verbs) },
            });
        }
    }

    Ok(quote! {
        impl #impl_generics ::opkit::derive::ControllerWiring for #ident #ty_generics #where_clause {
            fn controller(self) -> ::opkit::controller::Controller<Self> {
                #primary_check
                #primary_call
                    #(#owns)*
                    #(#indexes)*
                    #(#watches)*
                    #(#fleet_watches)*
                    #(#reads)*
                    #(#event_filters)*
                    #name
                    #field_manager
                    #workers
                    #throttle
                    #multicluster
            }

            fn rbac_rules() -> ::opkit::rbac::Rules {
                ::opkit::rbac::Rules::new()
                    #(#rules)*
            }
        }
    })
}

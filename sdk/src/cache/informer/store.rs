//! The store behind every informer: `Arc<K>` by key, with named secondary
//! indexes (client-go's `ThreadSafeStore` + `Indexer`). Only the informer
//! writes it; everyone else reads through a [`Store`], a read-only handle.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use opkit::cache::{NAMESPACE_INDEX, SharedCache};
//!
//! # async fn doc(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let cache = SharedCache::new(client);
//! let informer = cache.informer::<ConfigMap>()?;
//! informer.add_index("by-app", |cm: &ConfigMap| {
//!     cm.metadata.labels.as_ref()
//!         .and_then(|l| l.get("app").cloned())
//!         .into_iter().collect()
//! })?;
//! let store = informer.store();
//! cache.start()?;
//! cache.wait_for_sync(std::time::Duration::from_secs(30)).await?;
//! let web = store.get(Some("prod"), "web");
//! let shop = store.by_index("by-app", "shop")?;
//! let prod = store.by_index(NAMESPACE_INDEX, "prod")?;
//! # let _ = (web, shop, prod);
//! # Ok(()) }
//! ```
//!
//! Rules (as client-go):
//! - every add / update / delete maintains every index: an object's old index
//!   values are removed before its new ones are added, empty value sets are
//!   dropped;
//! - reads hand out `Arc<K>` clones, never deep copies of the objects;
//! - the namespace index ([`NAMESPACE_INDEX`]) is built in;
//! - indexes may be added at any time: a new index is built over the objects
//!   already stored.
//!
//! Readers take a shared lock; the writer (the informer applying one delta)
//! holds the exclusive lock only for a single map insert plus its index
//! updates, so readers are never blocked for long.

use std::{fmt, sync::Arc};

use hashbrown::{HashMap, HashSet};
use kube::Resource;
use parking_lot::RwLock;

#[cfg(test)]
use crate::cache::key::KeyError;
use crate::cache::{error::IndexError, key::ObjectKey, undecodable::UndecodableObject};

/// Name of the built-in index from namespace to objects (cluster-scoped
/// objects are indexed under `""`).
pub const NAMESPACE_INDEX: &str = "namespace";

/// An index function: the index values of an object (empty: not indexed).
pub type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

enum IndexKind<K> {
    /// The built-in namespace index, computed from the key (no allocation).
    Namespace,
    /// A user index function.
    Func(IndexFn<K>),
}

struct Index<K> {
    kind: IndexKind<K>,
    values: HashMap<String, HashSet<ObjectKey>>,
}

impl<K> Index<K> {
    fn add_value(&mut self, value: &str, key: &ObjectKey) {
        match self.values.get_mut(value) {
            Some(set) => {
                set.insert(key.clone());
            }
            None => {
                let mut set = HashSet::new();
                set.insert(key.clone());
                self.values.insert(value.to_string(), set);
            }
        }
    }

    fn remove_value(&mut self, value: &str, key: &ObjectKey) {
        if let Some(set) = self.values.get_mut(value) {
            set.remove(key);
            if set.is_empty() {
                self.values.remove(value);
            }
        }
    }

    fn insert(&mut self, key: &ObjectKey, obj: &K) {
        match &self.kind {
            IndexKind::Namespace => {
                let ns = key.namespace().unwrap_or("");
                self.add_value(ns, key);
            }
            IndexKind::Func(f) => {
                for v in f(obj) {
                    self.add_value(&v, key);
                }
            }
        }
    }

    fn remove(&mut self, key: &ObjectKey, obj: &K) {
        match &self.kind {
            IndexKind::Namespace => {
                let ns = key.namespace().unwrap_or("");
                self.remove_value(ns, key);
            }
            IndexKind::Func(f) => {
                for v in f(obj) {
                    self.remove_value(&v, key);
                }
            }
        }
    }

    fn update(&mut self, key: &ObjectKey, old: Option<&K>, new: &K) {
        let func = match &self.kind {
            // the key fixes the namespace: an update never moves it
            IndexKind::Namespace => {
                if old.is_none() {
                    self.insert(key, new);
                }
                return;
            }
            IndexKind::Func(f) => Arc::clone(f),
        };
        let new_values = func(new);
        if let Some(old) = old {
            let old_values = func(old);
            if old_values == new_values {
                return;
            }
            for v in old_values {
                self.remove_value(&v, key);
            }
        }
        for v in new_values {
            self.add_value(&v, key);
        }
    }
}

struct Inner<K> {
    items: HashMap<ObjectKey, Arc<K>>,
    indices: HashMap<String, Index<K>>,
    /// Keys whose current version does not deserialize into `K`: what of
    /// them is kept (never also in `items`).
    undecodable: HashMap<ObjectKey, Arc<UndecodableObject>>,
}

/// A thread-safe, indexed store of objects, written by its informer.
/// Cloning an `Indexer` gives another handle to the same store.
pub(crate) struct Indexer<K> {
    inner: Arc<RwLock<Inner<K>>>,
}

impl<K> Clone for Indexer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<K> fmt::Debug for Indexer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.inner.read();
        f.debug_struct("Indexer")
            .field("len", &inner.items.len())
            .field("indices", &inner.indices.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> Default for Indexer<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource + Send + Sync + 'static> Indexer<K> {
    /// An empty store with the built-in [`NAMESPACE_INDEX`].
    pub(crate) fn new() -> Self {
        let mut indices = HashMap::new();
        indices.insert(
            NAMESPACE_INDEX.to_string(),
            Index {
                kind: IndexKind::Namespace,
                values: HashMap::new(),
            },
        );
        Self {
            inner: Arc::new(RwLock::new(Inner {
                items: HashMap::new(),
                indices,
                undecodable: HashMap::new(),
            })),
        }
    }

    /// Registers one index function under `name`, building it over the
    /// objects already stored.
    pub(crate) fn add_indexer<F>(&self, name: impl Into<String>, func: F) -> Result<(), IndexError>
    where
        F: Fn(&K) -> Vec<String> + Send + Sync + 'static,
    {
        self.add_indexers([(name.into(), Arc::new(func) as IndexFn<K>)])
    }

    /// Registers several index functions at once (all or none: a duplicate
    /// name fails the whole call). Each is built over the objects already
    /// stored.
    pub(crate) fn add_indexers(
        &self,
        indexers: impl IntoIterator<Item = (String, IndexFn<K>)>,
    ) -> Result<(), IndexError> {
        let indexers: Vec<_> = indexers.into_iter().collect();
        let mut inner = self.inner.write();
        let mut seen = HashSet::new();
        for (name, _) in &indexers {
            if inner.indices.contains_key(name) || !seen.insert(name.clone()) {
                return Err(IndexError::DuplicateIndex(name.clone()));
            }
        }
        let Inner { items, indices, .. } = &mut *inner;
        for (name, func) in indexers {
            let mut index = Index {
                kind: IndexKind::Func(func),
                values: HashMap::new(),
            };
            for (key, obj) in items.iter() {
                index.insert(key, obj);
            }
            indices.insert(name, index);
        }
        Ok(())
    }

    #[cfg(test)]
    /// Adds or replaces `obj` (keyed by its namespace/name).
    pub(crate) fn add(&self, obj: Arc<K>) -> Result<Option<Arc<K>>, KeyError> {
        let key = ObjectKey::of(&*obj)?;
        Ok(self.insert(key, obj))
    }

    #[cfg(test)]
    /// Same as [`Indexer::add`]: stores `obj`, returning the previous version.
    pub(crate) fn update(&self, obj: Arc<K>) -> Result<Option<Arc<K>>, KeyError> {
        self.add(obj)
    }

    #[cfg(test)]
    /// Removes the object with `obj`'s key, returning it.
    pub(crate) fn delete(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = ObjectKey::of(obj)?;
        Ok(self.remove(key.as_str()))
    }

    /// Stores `obj` under `key`, returning the previous version.
    pub(crate) fn insert(&self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let Inner {
            items,
            indices,
            undecodable,
        } = &mut *inner;
        // Hot path: no hashing of the key unless some object is undecodable.
        if !undecodable.is_empty() {
            undecodable.remove(&key);
        }
        let old = items.insert(key.clone(), Arc::clone(&obj));
        for index in indices.values_mut() {
            index.update(&key, old.as_deref(), &obj);
        }
        old
    }

    /// Removes the object under `key` (and any undecodable record of it),
    /// returning the object.
    pub(crate) fn remove(&self, key: &str) -> Option<Arc<K>> {
        let mut inner = self.inner.write();
        let Inner {
            items,
            indices,
            undecodable,
        } = &mut *inner;
        if !undecodable.is_empty() {
            undecodable.remove(key);
        }
        let (key, old) = items.remove_entry(key)?;
        for index in indices.values_mut() {
            index.remove(&key, &old);
        }
        Some(old)
    }

    #[cfg(test)]
    /// Replaces the whole content with `list` (objects without a name are
    /// skipped) and rebuilds every index.
    pub(crate) fn replace(&self, list: impl IntoIterator<Item = Arc<K>>) {
        let items: HashMap<ObjectKey, Arc<K>> = list
            .into_iter()
            .filter_map(|obj| ObjectKey::of(&*obj).ok().map(|k| (k, obj)))
            .collect();
        let mut inner = self.inner.write();
        inner.items = items;
        inner.undecodable.clear();
        let Inner { items, indices, .. } = &mut *inner;
        for index in indices.values_mut() {
            index.values.clear();
            for (key, obj) in items.iter() {
                index.insert(key, obj);
            }
        }
    }

    /// Records that the current version of `key` does not deserialize: the
    /// object stored under it (stale now) is removed and returned, with the
    /// previous record if there was one.
    pub(crate) fn set_undecodable(
        &self,
        key: ObjectKey,
        record: Arc<UndecodableObject>,
    ) -> (Option<Arc<K>>, Option<Arc<UndecodableObject>>) {
        let mut inner = self.inner.write();
        let Inner {
            items,
            indices,
            undecodable,
        } = &mut *inner;
        let old = items.remove(&key);
        if let Some(old) = &old {
            for index in indices.values_mut() {
                index.remove(&key, old);
            }
        }
        let old_record = undecodable.insert(key, record);
        (old, old_record)
    }

    /// The undecodable record of `key`, if its current version is one.
    pub(crate) fn undecodable(&self, key: &str) -> Option<Arc<UndecodableObject>> {
        self.inner.read().undecodable.get(key).cloned()
    }

    /// Every undecodable record.
    pub(crate) fn undecodable_entries(&self) -> Vec<(ObjectKey, Arc<UndecodableObject>)> {
        self.inner
            .read()
            .undecodable
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// How many keys are undecodable.
    pub(crate) fn undecodable_len(&self) -> usize {
        self.inner.read().undecodable.len()
    }

    /// The object under `key`, or its undecodable record as the error;
    /// `Ok(None)` when the key is unknown. One lock.
    pub(crate) fn lookup(&self, key: &str) -> Result<Option<Arc<K>>, Arc<UndecodableObject>> {
        let inner = self.inner.read();
        if let Some(obj) = inner.items.get(key) {
            return Ok(Some(Arc::clone(obj)));
        }
        match inner.undecodable.get(key) {
            Some(rec) => Err(Arc::clone(rec)),
            None => Ok(None),
        }
    }

    /// True when `key` is stored, as an object or as an undecodable record.
    pub(crate) fn knows(&self, key: &str) -> bool {
        let inner = self.inner.read();
        inner.items.contains_key(key) || inner.undecodable.contains_key(key)
    }

    /// The object under `key` (`namespace/name` or `name`).
    pub(crate) fn get(&self, key: &str) -> Option<Arc<K>> {
        self.inner.read().items.get(key).cloned()
    }

    /// The object `name` in `namespace` (`None` for cluster-scoped).
    pub(crate) fn get_by_name(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        let key = ObjectKey::new(namespace, name);
        self.get(key.as_str())
    }

    /// All objects (in no particular order).
    pub(crate) fn list(&self) -> Vec<Arc<K>> {
        self.inner.read().items.values().cloned().collect()
    }

    /// All (key, object) pairs, read under one lock.
    pub(crate) fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        self.inner
            .read()
            .items
            .iter()
            .map(|(k, v)| (k.clone(), Arc::clone(v)))
            .collect()
    }

    /// The objects in `namespace` (through the namespace index).
    pub(crate) fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_default()
    }

    /// The number of objects stored.
    pub(crate) fn len(&self) -> usize {
        self.inner.read().items.len()
    }

    /// True when nothing is stored.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects whose `index_name` values include `value`.
    pub(crate) fn by_index(
        &self,
        index_name: &str,
        value: &str,
    ) -> Result<Vec<Arc<K>>, IndexError> {
        let inner = self.inner.read();
        let index = inner
            .indices
            .get(index_name)
            .ok_or_else(|| IndexError::UnknownIndex(index_name.to_string()))?;
        Ok(index
            .values
            .get(value)
            .map(|set| {
                set.iter()
                    .filter_map(|k| inner.items.get(k).cloned())
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Every value currently present in `index_name` (tests check that
    /// empty value sets are dropped).
    #[cfg(test)]
    pub(crate) fn list_index_values(&self, index_name: &str) -> Result<Vec<String>, IndexError> {
        let inner = self.inner.read();
        let index = inner
            .indices
            .get(index_name)
            .ok_or_else(|| IndexError::UnknownIndex(index_name.to_string()))?;
        Ok(index.values.keys().cloned().collect())
    }

    /// The names of the registered indexes.
    pub(crate) fn index_names(&self) -> Vec<String> {
        self.inner.read().indices.keys().cloned().collect()
    }
}

/// A read-only handle to an informer's store: what users read the cache
/// through. Cloning gives another handle to the same store; reads hand out
/// `Arc<K>` clones, never deep copies.
pub struct Store<K> {
    indexer: Indexer<K>,
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            indexer: self.indexer.clone(),
        }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.indexer.inner.read();
        f.debug_struct("Store")
            .field("len", &inner.items.len())
            .field("indices", &inner.indices.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> Store<K> {
    pub(crate) fn new(indexer: Indexer<K>) -> Self {
        Self { indexer }
    }

    /// The object `name` in `namespace` (`None` for cluster-scoped objects).
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Option<Arc<K>> {
        self.indexer.get_by_name(namespace, name)
    }

    /// All objects (in no particular order).
    pub fn list(&self) -> Vec<Arc<K>> {
        self.indexer.list()
    }

    /// The objects in `namespace` (through the namespace index).
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<K>> {
        self.indexer.list_namespace(namespace)
    }

    /// The objects whose `index` values include `value`; an index that was
    /// never added is an error naming it.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        self.indexer.by_index(index, value)
    }

    /// The number of objects stored.
    pub fn len(&self) -> usize {
        self.indexer.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.indexer.is_empty()
    }

    /// The names of the indexes (the built-in [`NAMESPACE_INDEX`] included).
    pub(crate) fn index_names(&self) -> Vec<String> {
        self.indexer.index_names()
    }

    /// How many objects' current versions do not deserialize into `K`.
    #[cfg(test)]
    pub(crate) fn undecodable_len(&self) -> usize {
        self.indexer.undecodable_len()
    }

    /// The record of `name` in `namespace` when its current version does
    /// not deserialize into `K` ([`get`](Self::get) returns `None` for it);
    /// see [`undecodable`](crate::cache::undecodable).
    ///
    /// ```no_run
    /// # fn doc(store: opkit::cache::Store<k8s_openapi::api::core::v1::ConfigMap>) {
    /// if let Some(bad) = store.undecodable(Some("prod"), "web") {
    ///     println!("{bad}; finalizers: {:?}", bad.metadata().finalizers);
    /// }
    /// # }
    /// ```
    pub fn undecodable(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Arc<UndecodableObject>> {
        self.indexer
            .undecodable(ObjectKey::new(namespace, name).as_str())
    }

    /// The object `name` in `namespace`, or
    /// [`CacheError::Undecodable`](crate::cache::error::CacheError::Undecodable) when its
    /// current version does not deserialize into `K`; `Ok(None)` when the
    /// cache does not hold it.
    ///
    /// ```no_run
    /// # fn doc(store: opkit::cache::Store<k8s_openapi::api::core::v1::ConfigMap>) -> Result<(), opkit::cache::CacheError> {
    /// let web = store.try_get(Some("prod"), "web")?;
    /// # let _ = web;
    /// # Ok(()) }
    /// ```
    pub fn try_get(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<K>>, crate::cache::error::CacheError> {
        self.indexer
            .lookup(ObjectKey::new(namespace, name).as_str())
            .map_err(crate::cache::error::CacheError::Undecodable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(ns: &str, name: &str, app: &str) -> Arc<ConfigMap> {
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn by_app(cm: &ConfigMap) -> Vec<String> {
        cm.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app").cloned())
            .into_iter()
            .collect()
    }

    fn sorted(mut v: Vec<String>) -> Vec<String> {
        v.sort();
        v
    }

    #[test]
    fn indexes_follow_add_update_delete() {
        let s = Indexer::new();
        s.add_indexer("app", by_app).unwrap();
        s.add(cm("a", "x", "one")).unwrap();
        s.add(cm("a", "y", "one")).unwrap();
        s.add(cm("b", "z", "two")).unwrap();
        assert_eq!(s.by_index("app", "one").unwrap().len(), 2);
        assert_eq!(s.list_namespace("a").len(), 2);
        assert_eq!(s.by_index("app", "two").unwrap().len(), 1);

        // update moves x from "one" to "two"
        let old = s.update(cm("a", "x", "two")).unwrap();
        assert!(old.is_some());
        assert_eq!(s.by_index("app", "one").unwrap().len(), 1);
        assert_eq!(s.by_index("app", "two").unwrap().len(), 2);
        let names: Vec<String> = s
            .by_index("app", "two")
            .unwrap()
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(sorted(names), vec!["x", "z"]);

        // delete y: value "one" disappears entirely
        s.delete(&cm("a", "y", "ignored")).unwrap();
        assert!(s.by_index("app", "one").unwrap().is_empty());
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn reads_share_the_stored_arc() {
        let s = Indexer::new();
        let obj = cm("a", "x", "one");
        s.add(Arc::clone(&obj)).unwrap();
        let got = s.get("a/x").unwrap();
        assert!(Arc::ptr_eq(&obj, &got));
        assert!(Arc::ptr_eq(&obj, &s.list()[0]));
        assert!(Arc::ptr_eq(
            &obj,
            &s.by_index(NAMESPACE_INDEX, "a").unwrap()[0]
        ));
    }

    #[test]
    fn add_indexers_builds_over_existing_and_rejects_duplicates() {
        let s = Indexer::new();
        s.add(cm("a", "x", "one")).unwrap();
        s.add_indexer("app", by_app).unwrap();
        assert_eq!(s.by_index("app", "one").unwrap().len(), 1);
        assert_eq!(
            s.add_indexer("app", by_app),
            Err(IndexError::DuplicateIndex("app".into()))
        );
        assert_eq!(
            s.add_indexer(NAMESPACE_INDEX, by_app),
            Err(IndexError::DuplicateIndex(NAMESPACE_INDEX.into()))
        );
        assert_eq!(
            s.by_index("nope", "x").unwrap_err(),
            IndexError::UnknownIndex("nope".into())
        );
    }

    #[test]
    fn replace_rebuilds_indexes() {
        let s = Indexer::new();
        s.add_indexer("app", by_app).unwrap();
        s.add(cm("a", "x", "one")).unwrap();
        s.replace([cm("b", "y", "two")]);
        assert!(s.get("a/x").is_none());
        assert_eq!(s.list_index_values("app").unwrap(), vec!["two"]);
        assert_eq!(s.list_index_values(NAMESPACE_INDEX).unwrap(), vec!["b"]);
    }

    #[test]
    fn multi_valued_index() {
        let s: Indexer<ConfigMap> = Indexer::new();
        s.add_indexer("keys", |cm: &ConfigMap| {
            cm.data
                .as_ref()
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default()
        })
        .unwrap();
        let mut obj = (*cm("a", "x", "one")).clone();
        obj.data = Some([("k1".into(), "v".into()), ("k2".into(), "v".into())].into());
        s.add(Arc::new(obj)).unwrap();
        assert_eq!(s.by_index("keys", "k1").unwrap().len(), 1);
        assert_eq!(s.by_index("keys", "k2").unwrap().len(), 1);
        s.remove("a/x");
        assert!(s.list_index_values("keys").unwrap().is_empty());
    }

    #[test]
    fn concurrent_readers_and_writer() {
        let s: Indexer<ConfigMap> = Indexer::new();
        std::thread::scope(|scope| {
            let w = s.clone();
            scope.spawn(move || {
                for i in 0..2000 {
                    w.add(cm("ns", &format!("o{i}"), "a")).unwrap();
                    if i % 3 == 0 {
                        w.remove(&format!("ns/o{i}"));
                    }
                }
            });
            for _ in 0..2 {
                let r = s.clone();
                scope.spawn(move || {
                    for _ in 0..200 {
                        let n = r.list().len();
                        let m = r.list_namespace("ns").len();
                        assert!(n <= 2000 && m <= 2000);
                    }
                });
            }
        });
        assert_eq!(s.len(), 2000 - 667);
        assert_eq!(s.list_namespace("ns").len(), 2000 - 667);
    }
}

//! Per-context storage for the layers above [`crate::context`]: the
//! library handles of each thread (`handles.rs`) and the cache of loaded
//! modules (`jit.rs`) live here, keyed by their type.
//!
//! A [`Context`](crate::Context) owns one [`Registry`] and knows nothing
//! of what is stored in it, so those layers depend on the context and the
//! context on none of them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use baracuda_kernels_types::Result;

/// A stored value's type, and the thread it belongs to (`None`: all).
type Key = (TypeId, Option<ThreadId>);

/// Values of any `Send + Sync` type, one per type and thread (or one per
/// type for all threads), created on first use and kept until the
/// registry drops.
#[derive(Default)]
pub(crate) struct Registry {
    map: Mutex<HashMap<Key, Arc<dyn Any + Send + Sync>>>,
}

impl Registry {
    /// The `T` of `thread` (`None`: the one all threads share). On first
    /// use `create` makes it while the registry is locked, so concurrent
    /// first calls create it once; an error is returned and nothing is
    /// stored.
    pub(crate) fn get_or_create<T: Any + Send + Sync>(
        &self,
        thread: Option<ThreadId>,
        create: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let key: Key = (TypeId::of::<T>(), thread);
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = map.get(&key) {
            if let Ok(v) = v.clone().downcast::<T>() {
                return Ok(v);
            }
        }
        let v = Arc::new(create()?);
        map.insert(key, v.clone());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_type_and_thread() {
        let r = Registry::default();
        let here = Some(std::thread::current().id());
        let a = r.get_or_create(here, || Ok(1u32)).unwrap();
        let b = r.get_or_create(here, || Ok(2u32)).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let shared = r.get_or_create(None, || Ok(3u32)).unwrap();
        assert_eq!(*shared, 3);
        let other = r.get_or_create(here, || Ok(4u64)).unwrap();
        assert_eq!(*other, 4);
        let failed: Result<Arc<i8>> = r.get_or_create(here, || {
            Err(baracuda_kernels_types::Error::Unsupported {
                op: "registry test",
                what: "nothing".into(),
            })
        });
        assert!(failed.is_err());
        assert_eq!(*r.get_or_create(here, || Ok(5i8)).unwrap(), 5);
    }
}

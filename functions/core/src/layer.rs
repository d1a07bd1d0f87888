//! The one way to decorate a storage port (`docs/design.md`, "Ports and adapters"): a
//! [`Layered`] store is an inner store and a layer, in the manner of `tower`'s layers.
//!
//! Each port is declared once with [`port!`](crate::port), which writes the trait and, from the
//! same list of methods:
//! - the port for `Arc<T>` (a store picked at start-up and shared);
//! - a layer trait for the port (`EntriesLayer` for [`LogEntries`](crate::ports::LogEntries), and
//!   so on) with one method per port method, each taking the inner store and by default running
//!   the inner call through [`Layer::around`];
//! - the port for [`Layered<S, L>`] when `L` implements that layer trait.
//!
//! So a layer written once (the fault adapter in [`crate::faults`], request counting, a test's
//! racer) sees every call of every port it is given: [`Layer::around`] wraps each call with
//! [`Call`] naming it, and a layer overrides only the methods whose results it changes (a stale
//! read, a lost response). A method added to a port needs its trait and its adapters and nothing
//! else: every layer picks it up through `around`.

use std::future::Future;

use async_trait::async_trait;

use crate::error::StoreError;

/// One call of a port method, as a layer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    /// The port's trait, such as `LogEntries`.
    pub port: &'static str,
    /// The method, such as `read_entries`.
    pub method: &'static str,
    /// The service the real adapter calls (`DynamoDB`, `S3`, `SQS`).
    pub service: &'static str,
    /// The request the real adapter sends for it, such as `Query` (`TransactWriteItems` for a
    /// transaction, `Batch` for a method that sends several).
    pub operation: &'static str,
}

/// What a layer does around every call it does not override.
#[async_trait]
pub trait Layer: Send + Sync + std::fmt::Debug {
    /// Runs `call` (the inner store's future); the default just awaits it. A port's error type
    /// takes a [`StoreError`], so a layer can fail any call the way the store would.
    async fn around<T, E, F>(&self, call: Call, run: F) -> Result<T, E>
    where
        T: Send,
        E: From<StoreError> + Send,
        F: Future<Output = Result<T, E>> + Send,
    {
        let _ = call;
        run.await
    }
}

/// An inner store seen through a layer. Implements every port `S` implements whose layer trait
/// `L` implements.
#[derive(Debug, Clone)]
pub struct Layered<S, L> {
    inner: S,
    layer: L,
}

impl<S, L> Layered<S, L> {
    pub fn new(inner: S, layer: L) -> Self {
        Self { inner, layer }
    }

    /// The store under the layer.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn layer(&self) -> &L {
        &self.layer
    }

    #[doc(hidden)]
    pub fn parts(&self) -> (&S, &L) {
        (&self.inner, &self.layer)
    }
}

/// Declares a storage port: its trait, the trait for `Arc<T>`, its layer trait, and the trait for
/// [`Layered`]. Every method is `async`, takes `&self` and returns a `Result` whose error type
/// converts from [`StoreError`]; `as Operation` names the request the real adapter sends (for
/// faults and counts).
///
/// ```ignore
/// port! {
///     /// Docs.
///     pub trait PushQueue("SQS"): PushQueueLayer {
///         /// Docs.
///         async fn send(&self, group: &str, dedupe_id: &str, body: String)
///             -> Result<(), StoreError> as SendMessage;
///     }
/// }
/// ```
///
/// A port whose trait is declared in a crate below this one (the snapshot engine's `BlobStore`)
/// is brought under layers with `impl` in place of `pub trait`: the same list of methods, and
/// only the layer trait and the trait for [`Layered`] are written. Such a port has no `Arc<T>`
/// implementation (the orphan rule keeps it out of this crate, and one in the lower crate would
/// be a second list of the methods to keep in step): layer the store itself,
/// `Layered<MemBlobs, L>`, and share that in an `Arc`; a caller that takes `&dyn BlobStore`
/// is given `&*arc`.
#[macro_export]
macro_rules! port {
    (
        $(#[$attr:meta])*
        pub trait $port:ident ($service:literal) : $layer:ident {
            $(
                $(#[$mattr:meta])*
                async fn $method:ident (&self $(, $arg:ident : $ty:ty)* $(,)?)
                    -> Result<$ok:ty, $err:ty> as $operation:ident;
            )*
        }
    ) => {
        $(#[$attr])*
        #[async_trait::async_trait]
        pub trait $port: Send + Sync + std::fmt::Debug {
            $(
                $(#[$mattr])*
                async fn $method(&self $(, $arg: $ty)*) -> Result<$ok, $err>;
            )*
        }

        #[async_trait::async_trait]
        impl<T: $port + ?Sized> $port for std::sync::Arc<T> {
            $(
                async fn $method(&self $(, $arg: $ty)*) -> Result<$ok, $err> {
                    (**self).$method($($arg),*).await
                }
            )*
        }

        $crate::port! {
            impl $port ($service): $layer {
                $(
                    async fn $method(&self $(, $arg: $ty)*) -> Result<$ok, $err> as $operation;
                )*
            }
        }
    };
    (
        impl $port:ident ($service:literal) : $layer:ident {
            $(
                $(#[$mattr:meta])*
                async fn $method:ident (&self $(, $arg:ident : $ty:ty)* $(,)?)
                    -> Result<$ok:ty, $err:ty> as $operation:ident;
            )*
        }
    ) => {
        #[doc = concat!("How a [`Layer`](", "crate::layer::Layer", ") decorates [`", stringify!($port), "`]: ")]
        #[doc = "one method per port method, given the inner store. Each runs the inner call through"]
        #[doc = "[`Layer::around`](crate::layer::Layer::around) unless the layer overrides it."]
        #[async_trait::async_trait]
        pub trait $layer: $crate::layer::Layer {
            $(
                // The inner store comes before the port method's own arguments.
                #[allow(clippy::too_many_arguments)]
                async fn $method<S: $port + ?Sized>(
                    &self,
                    inner: &S
                    $(, $arg: $ty)*
                ) -> Result<$ok, $err> {
                    let call = $crate::layer::Call {
                        port: stringify!($port),
                        method: stringify!($method),
                        service: $service,
                        operation: stringify!($operation),
                    };
                    self.around(call, inner.$method($($arg),*)).await
                }
            )*
        }

        #[async_trait::async_trait]
        impl<S: $port, L: $layer> $port for $crate::layer::Layered<S, L> {
            $(
                async fn $method(&self $(, $arg: $ty)*) -> Result<$ok, $err> {
                    let (inner, layer) = self.parts();
                    <L as $layer>::$method(layer, inner $(, $arg)*).await
                }
            )*
        }
    };
}

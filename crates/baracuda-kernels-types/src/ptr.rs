//! Typed device addresses: what family code hands to kernels and libraries
//! once a view's bounds are checked, so an address keeps the element type
//! and the read/write role it was taken with.
//!
//! Both types are `#[repr(transparent)]` over the `u64` address, so a
//! `#[repr(C)]` kernel parameter struct can hold them where the kernel
//! declares `const T*` / `T*`. Building or offsetting one is safe (it is a
//! number); dereferencing happens only in a kernel launch or library call,
//! which is `unsafe` and states why the address is valid.

use core::fmt;
use core::marker::PhantomData;

macro_rules! dev_ptr {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        pub struct $name<T> {
            addr: u64,
            _elem: PhantomData<fn() -> T>,
        }

        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<T> {}
        impl<T> PartialEq for $name<T> {
            fn eq(&self, other: &Self) -> bool {
                self.addr == other.addr
            }
        }
        impl<T> Eq for $name<T> {}
        impl<T> Default for $name<T> {
            fn default() -> Self {
                Self::NULL
            }
        }
        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.addr)
            }
        }

        impl<T> $name<T> {
            /// The null address: an absent optional argument.
            pub const NULL: Self = Self::from_addr(0);

            /// Wrap a raw device address.
            pub const fn from_addr(addr: u64) -> Self {
                $name {
                    addr,
                    _elem: PhantomData,
                }
            }
            /// The raw device address.
            pub const fn addr(self) -> u64 {
                self.addr
            }
            /// True for the null address.
            pub const fn is_null(self) -> bool {
                self.addr == 0
            }
            /// The address `elems` elements further on.
            pub const fn add(self, elems: usize) -> Self {
                Self::from_addr(self.addr + (elems * core::mem::size_of::<T>()) as u64)
            }
            /// The address `bytes` bytes further on.
            pub const fn byte_add(self, bytes: usize) -> Self {
                Self::from_addr(self.addr + bytes as u64)
            }
            /// The same address read as elements of `U` (workspace bytes
            /// laid out as typed scratch).
            pub const fn cast<U>(self) -> $name<U> {
                $name::from_addr(self.addr)
            }
        }
    };
}

dev_ptr!(
    /// The device address of elements a kernel or library call reads.
    DevPtr
);
dev_ptr!(
    /// The device address of elements a kernel or library call writes.
    DevPtrMut
);

impl<T> DevPtrMut<T> {
    /// The same address for reading.
    pub const fn as_const(self) -> DevPtr<T> {
        DevPtr::from_addr(self.addr)
    }
}

impl<T> From<DevPtrMut<T>> for DevPtr<T> {
    fn from(p: DevPtrMut<T>) -> Self {
        p.as_const()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_scale_by_the_element_size() {
        let p = DevPtr::<f32>::from_addr(0x1000);
        assert_eq!(p.add(3).addr(), 0x100c);
        assert_eq!(p.byte_add(3).addr(), 0x1003);
        assert_eq!(p.cast::<u16>().add(3).addr(), 0x1006);
        assert!(DevPtrMut::<u8>::NULL.is_null());
        assert_eq!(
            DevPtrMut::<f64>::from_addr(8).as_const(),
            DevPtr::from_addr(8)
        );
        assert_eq!(core::mem::size_of::<DevPtr<f64>>(), 8);
    }
}

//! GPU device properties.

use baracuda_kernels_types::{ArchSku, Error, Result};
use cudarc::driver::{result, sys};

use crate::libs::{ensure_loaded, CudaLib};
use crate::status::CudaResultExt;

/// One CUDA device and the properties plans size their launches from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Device ordinal.
    pub ordinal: usize,
    /// Marketing name (`NVIDIA H200`).
    pub name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// Architecture kernels are compiled for (`sm_90a` on Hopper).
    pub arch: ArchSku,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Maximum resident threads per multiprocessor.
    pub max_threads_per_sm: u32,
    /// Shared memory a block may use after opting in, in bytes.
    pub smem_per_block_optin_bytes: usize,
    /// L2 cache size in bytes.
    pub l2_bytes: usize,
    /// Global memory in bytes.
    pub total_mem_bytes: usize,
}

fn attr(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Result<i32> {
    // SAFETY: `dev` came from cuDeviceGet after cuInit succeeded.
    unsafe { result::device::get_attribute(dev, a) }.call("cuDeviceGetAttribute")
}

impl Device {
    /// Number of CUDA devices.
    ///
    /// # Errors
    /// `LibraryNotFound` without a driver; `Cuda` if `cuInit` fails.
    pub fn count() -> Result<usize> {
        ensure_loaded(CudaLib::Driver)?;
        result::init().call("cuInit")?;
        Ok(result::device::get_count().call("cuDeviceGetCount")? as usize)
    }

    /// Properties of device `ordinal`.
    ///
    /// # Errors
    /// `NoDevice` when the ordinal does not exist; `LibraryNotFound`, `Cuda`.
    pub fn get(ordinal: usize) -> Result<Device> {
        let count = Self::count()?;
        if ordinal >= count {
            return Err(Error::NoDevice { ordinal, count });
        }
        let dev = result::device::get(ordinal as i32).call("cuDeviceGet")?;
        let name = result::device::get_name(dev).call("cuDeviceGetName")?;
        use sys::CUdevice_attribute as A;
        let major = attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32;
        let minor = attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32;
        // SAFETY: as in `attr`.
        let total = unsafe { result::device::total_mem(dev) }.call("cuDeviceTotalMem")?;
        Ok(Device {
            ordinal,
            name,
            compute_capability: (major, minor),
            arch: ArchSku::from_compute_capability(major, minor),
            sm_count: attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            max_threads_per_sm: attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?
                as u32,
            smem_per_block_optin_bytes: attr(
                dev,
                A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )? as usize,
            l2_bytes: attr(dev, A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize,
            total_mem_bytes: total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a GPU driver (CI, this crate's host tests) asking for a
    /// device is an error naming the library and where it was looked for,
    /// never a panic. With a driver, the count is simply returned.
    #[test]
    fn missing_driver_is_an_error_not_a_panic() {
        match Device::count() {
            Ok(_) => {}
            Err(Error::LibraryNotFound {
                lib,
                searched,
                hint,
            }) => {
                assert_eq!(lib, "cuda");
                assert!(
                    searched.iter().any(|s| s.contains("libcuda.so.1")),
                    "{searched:?}"
                );
                assert!(!hint.is_empty());
                let msg = Error::LibraryNotFound {
                    lib,
                    searched,
                    hint,
                }
                .to_string();
                assert!(
                    msg.starts_with("could not load the CUDA library cuda"),
                    "{msg}"
                );
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

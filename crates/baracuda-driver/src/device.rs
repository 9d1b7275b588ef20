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
    /// Number of CUDA devices: `Ok(0)` when there is no driver or the
    /// driver sees no device, so `Device::count()? > 0` is the "is a GPU
    /// here" check. [`Device::get`] says why there is none.
    ///
    /// # Errors
    /// `Cuda` when a driver is present but fails to initialise for another
    /// reason (a driver too old for CUDA 13, a broken install).
    pub fn count() -> Result<usize> {
        match Self::init_count() {
            Err(Error::LibraryNotFound { .. }) => Ok(0),
            Err(Error::Cuda { status, .. })
                if status.code == sys::cudaError_enum::CUDA_ERROR_NO_DEVICE as i64 =>
            {
                Ok(0)
            }
            r => r,
        }
    }

    /// Load the driver, initialise it and count its devices.
    fn init_count() -> Result<usize> {
        ensure_loaded(CudaLib::Driver)?;
        result::init().call("cuInit")?;
        Ok(result::device::get_count().call("cuDeviceGetCount")? as usize)
    }

    /// Properties of device `ordinal`.
    ///
    /// # Errors
    /// `LibraryNotFound` without a driver (naming where it was looked for);
    /// `Cuda` when the driver fails to initialise (`CUDA_ERROR_NO_DEVICE`
    /// when it sees no GPU); `NoDevice` when the ordinal does not exist.
    pub fn get(ordinal: usize) -> Result<Device> {
        let count = Self::init_count()?;
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

    /// Without a GPU driver (CI, this crate's host tests) there are no
    /// devices, and asking for one is an error naming the library and
    /// where it was looked for, never a panic. With a driver, the count is
    /// simply returned and device 0 exists when it is positive.
    #[test]
    fn missing_driver_is_zero_devices_and_get_says_why() {
        let count = Device::count().expect("count never fails for a missing driver");
        match Device::get(0) {
            Ok(d) => {
                assert!(count > 0);
                assert_eq!(d.ordinal, 0);
            }
            Err(Error::LibraryNotFound {
                lib,
                searched,
                hint,
            }) => {
                assert_eq!(count, 0);
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
            Err(Error::Cuda { call, .. }) => {
                assert_eq!(count, 0);
                assert_eq!(call, "cuInit");
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
}

//! The backend's error type: the core's errors plus what only a device backend can get wrong
//! (no Vulkan loader, no device, a missing feature, a failed Vulkan call). The first three are
//! what a runtime acts on by falling back to the CPU backend, loudly ([`VulkanError::is_unavailable`]).

use std::fmt;

use ash::vk;
use lowbit_core::FormatId;

/// Everything that can go wrong in the Vulkan backend.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum VulkanError {
    /// An error from the core (lengths, bad blocks with their offsets, bad activations).
    Core(lowbit_core::Error),
    /// The Vulkan loader (libvulkan) could not be loaded.
    NoLoader(String),
    /// The loader found no usable device (none at all, or none with a compute queue).
    NoDevice(String),
    /// The device lacks something the backend needs (named).
    MissingFeature(String),
    /// A Vulkan call failed.
    Vk {
        /// The call.
        call: &'static str,
        /// Its result code.
        result: vk::Result,
    },
    /// No kernel for this format yet.
    Unsupported {
        /// The format.
        format: FormatId,
    },
    /// A buffer the call needs is larger than the device allows in one allocation.
    TooLarge {
        /// What the buffer holds.
        what: &'static str,
        /// Bytes needed.
        bytes: u64,
        /// The device's limit.
        limit: u64,
    },
    /// A bad argument to a backend-specific call (named).
    BadArgument(String),
}

impl VulkanError {
    /// Whether the error means "no usable Vulkan device here" (no loader, no device, a missing
    /// feature), on which a runtime falls back to another backend.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            VulkanError::NoLoader(_) | VulkanError::NoDevice(_) | VulkanError::MissingFeature(_)
        )
    }
}

impl From<lowbit_core::Error> for VulkanError {
    fn from(e: lowbit_core::Error) -> Self {
        VulkanError::Core(e)
    }
}

/// `map_err` helper: names the Vulkan call that failed.
pub(crate) fn vkr(call: &'static str) -> impl Fn(vk::Result) -> VulkanError {
    move |result| VulkanError::Vk { call, result }
}

impl fmt::Display for VulkanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VulkanError::Core(e) => write!(f, "{e}"),
            VulkanError::NoLoader(s) => write!(f, "no Vulkan loader: {s}"),
            VulkanError::NoDevice(s) => write!(f, "no usable Vulkan device: {s}"),
            VulkanError::MissingFeature(s) => write!(f, "the Vulkan device lacks {s}"),
            VulkanError::Vk { call, result } => write!(f, "{call} failed: {result}"),
            VulkanError::Unsupported { format } => {
                write!(f, "{format}: the Vulkan backend has no kernel for this format yet")
            }
            VulkanError::TooLarge { what, bytes, limit } => write!(
                f,
                "{what} needs {bytes} bytes, above the device's single-buffer limit of {limit}"
            ),
            VulkanError::BadArgument(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for VulkanError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            VulkanError::Core(e) => Some(e),
            _ => None,
        }
    }
}

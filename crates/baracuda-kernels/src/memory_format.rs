//! The memory order of activations and filters, shared by convolution,
//! pooling and normalization.

/// Memory order of activations and filters.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum ConvLayout {
    /// `[N, C, D, H, W]` dense (PyTorch's default memory format).
    #[default]
    ChannelsFirst,
    /// `[N, D, H, W, C]` dense (PyTorch's `channels_last`): what tensor
    /// cores want for f16 / bf16.
    ChannelsLast,
}

"""symjit.gluon.contrib.nn: Concurrent / HybridConcurrent, Identity and SyncBatchNorm.

On one machine without devices to synchronize, SyncBatchNorm is BatchNorm: the statistics of
the whole batch are those of the one device (MXNet's SyncBatchNorm with `num_devices=1`)."""
from ...nn import BatchNorm, Concurrent, HybridConcurrent, Identity  # noqa: F401

__all__ = ["Concurrent", "HybridConcurrent", "Identity", "SyncBatchNorm"]


class SyncBatchNorm(BatchNorm):
    """Batch normalization with statistics over all devices' parts of the batch."""

    def __init__(self, in_channels=0, num_devices=None, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, beta_initializer="zeros", gamma_initializer="ones",
                 running_mean_initializer="zeros", running_variance_initializer="ones", **kwargs):
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                         use_global_stats=use_global_stats, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels, **kwargs)
        self.num_devices = num_devices or 1

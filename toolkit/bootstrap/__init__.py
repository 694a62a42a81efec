"""The reference runner's bootstrap, bit for bit: its MT19937 draws (generated once per seed, kept in a
bounded in-process cache and an on-disk index cache) and the percentile intervals computed from them."""

from toolkit.bootstrap._draws import MT19937Stream, cached_indices, check_sizes
from toolkit.bootstrap._reference import BootstrapSettings, reference_intervals

__all__ = ["BootstrapSettings", "MT19937Stream", "cached_indices", "check_sizes", "reference_intervals"]

"""User-level differential privacy for any algorithm (:class:`Private`) and its accounting
through ``dp-accounting`` (:func:`dp_epsilon`, :class:`EpsilonCurve`, RDP or PLD; noise
calibrated to a target epsilon: :func:`noise_for_epsilon`); the plain per-client
reference of the DP step is :func:`sims.reference.privacy.reference_private_mean`."""
from .accounting import AccountingError, EpsilonCurve, dp_epsilon, dp_epsilon_fixed_m
from .accounting import (ACCOUNTANTS, epsilon_fixed_size, noise_for_epsilon,
                         sampling_note)
from .mechanism import DP_STREAM, Private, PrivacyError, clip_factors, noise_rng, sampling_rate_of

__all__ = ["Private", "PrivacyError", "AccountingError", "EpsilonCurve", "dp_epsilon",
           "dp_epsilon_fixed_m", "clip_factors", "noise_rng", "DP_STREAM", "ACCOUNTANTS",
           "epsilon_fixed_size", "noise_for_epsilon", "sampling_note", "sampling_rate_of"]

"""User-level differential privacy for any algorithm (:class:`Private`) and its accounting
through ``dp-accounting`` (:func:`dp_epsilon`, :class:`EpsilonCurve`); the plain per-client
reference of the DP step is :func:`sims.reference.privacy.reference_private_mean`."""
from .accounting import AccountingError, EpsilonCurve, dp_epsilon
from .mechanism import DP_STREAM, Private, PrivacyError, clip_factors, noise_rng

__all__ = ["Private", "PrivacyError", "AccountingError", "EpsilonCurve", "dp_epsilon",
           "clip_factors", "noise_rng", "DP_STREAM"]

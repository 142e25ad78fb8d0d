"""Server rules: what the server does with the mean pseudo-gradient ``U``.

A server rule is a transform (:mod:`.base`) on the server's ``[R, d]`` rows: its update is
the direction the server moves along, ``theta <- theta - eta * direction`` with the
algorithm's global rate ``eta`` (FedOpt, Reddi et al. 2021, Alg. 2). The objects, each with
its paper's conventions as defaults:

* :func:`SGD` -- the identity (FedAvg: ``theta <- theta - eta U``);
* :func:`Momentum` -- ``m = beta m + U`` (FedAvgM, Hsu et al. 2019);
* :func:`Adam`, :func:`AMSGrad`, :func:`AdaGrad`, :func:`Yogi` -- Reddi et al.'s adaptive
  servers (``tau`` outside the root, ``v0 = tau^2``, no bias correction unless asked;
  FedAda2's SU is :func:`AdaGrad` with momentum ``beta1``);

and :func:`server_rule`, the same built from the registry's string hyperparameters
(``server="adam"``, ``beta1``, ``beta2``, ``tau``, ``v0``, ...), so that every saved config
and command line keeps meaning what it meant: ``FedOpt(server="adam", tau=0.1)`` is
``FedOpt(server=Adam(tau=0.1))``.
"""
from __future__ import annotations

from .base import Chain, OptimizerError, chain
from .moments import Adaptive
from .moments import Momentum as _Momentum

SERVER_KINDS = ("sgd", "momentum", "adam", "amsgrad", "adagrad", "yogi")


def SGD() -> Chain:
    """The identity: the server moves along the mean pseudo-gradient."""
    return chain()


def Momentum(beta: float = 0.9) -> Chain:
    """Server momentum ``m = beta m + U`` (FedAvgM)."""
    return chain(_Momentum(beta))


def _adaptive(kind, beta1, beta2, tau, v0, eps_inside_sqrt, bias_correction) -> Chain:
    v0 = tau * tau if v0 is None else v0
    if tau == 0 and v0 == 0:
        raise OptimizerError("eps = 0 needs v0 > 0 (the denominator could vanish)")
    return chain(Adaptive(kind, beta1, beta2, tau, eps_inside_sqrt, v0, bias_correction))


def Adam(beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3, v0=None,
         eps_inside_sqrt: bool = False, bias_correction: bool = False) -> Chain:
    """Server Adam (FedAdam, Reddi et al. Alg. 2; FedLADA Alg. 1; Adp-Fed, Fed-LAMB SUPP
    Alg. 1): ``m = b1 m + (1 - b1) U``, ``v = b2 v + (1 - b2) U^2``, direction ``m / (sqrt(v)
    + tau)``, ``v0 = tau^2`` unless given."""
    return _adaptive("adam", beta1, beta2, tau, v0, eps_inside_sqrt, bias_correction)


def AMSGrad(beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3, v0=None,
            eps_inside_sqrt: bool = False, bias_correction: bool = False) -> Chain:
    """Server AMSGrad: :func:`Adam` with ``vhat = max(vhat, v)`` in place of ``v``."""
    return _adaptive("amsgrad", beta1, beta2, tau, v0, eps_inside_sqrt, bias_correction)


def AdaGrad(beta1: float = 0.0, tau: float = 1e-3, v0=None, eps_inside_sqrt: bool = False,
            beta2: float = 0.99, bias_correction: bool = False) -> Chain:
    """Server AdaGrad (FedAdaGrad; FedAda2's SU, spec 1.1): ``v = v + U^2``, momentum
    ``m = b1 m + (1 - b1) U`` (``b1 = 0``: ``m = U``), direction ``m / (sqrt(v) + tau)``."""
    return _adaptive("adagrad", beta1, beta2, tau, v0, eps_inside_sqrt, bias_correction)


def Yogi(beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3, v0=None,
         eps_inside_sqrt: bool = False, bias_correction: bool = False) -> Chain:
    """Server Yogi (FedYogi, Reddi et al. Alg. 2): ``v = v - (1 - b2) U^2 sign(v - U^2)``."""
    return _adaptive("yogi", beta1, beta2, tau, v0, eps_inside_sqrt, bias_correction)


_MAKERS = {"adam": Adam, "amsgrad": AMSGrad, "adagrad": AdaGrad, "yogi": Yogi}


def server_rule(kind, *, beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3,
                v0=None, eps_inside_sqrt: bool = False, bias_correction: bool = False,
                momentum: float = 0.9) -> Chain:
    """The server rule ``kind``: a rule object as it is, or one named by a string
    (:data:`SERVER_KINDS`) built from the other arguments."""
    if not isinstance(kind, str):
        if not hasattr(kind, "update"):
            raise OptimizerError(f"a server rule is a name in {SERVER_KINDS} or a rule "
                                 f"object, got {kind!r}")
        return kind if isinstance(kind, Chain) else chain(kind)
    if kind not in SERVER_KINDS:
        raise OptimizerError(f"unknown server rule {kind!r}; choose one of {SERVER_KINDS}")
    if kind == "sgd":
        return SGD()
    if kind == "momentum":
        return Momentum(momentum)
    return _MAKERS[kind](beta1=beta1, beta2=beta2, tau=tau, v0=v0,
                         eps_inside_sqrt=eps_inside_sqrt, bias_correction=bias_correction)

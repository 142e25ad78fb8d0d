"""The one command-line shape of ``python -m sims.compare``, ``python -m sims.sweep`` and the
``reproduce`` entries (and of ``fedtoolkit``, :mod:`sims.console`).

Every command builds its parser on ``argparse`` from the pieces here, so a flag means the same
thing everywhere it applies:

* :func:`add_problem_args`: ``--problem`` (``quadratic``, ``DATASET-MODEL`` such as
  ``mnist-mlp``, or ``arrays:PATH.npz``: a user's arrays, :mod:`sims.problems.arrays`),
  ``--partition SCHEME[:key=value...]`` (``dirichlet:alpha=0.5``, ``shards``,
  ``iid``; :func:`parse_partition`), the population and local-work flags;
* :func:`add_run_args`: ``--device`` (:func:`check_device`: ``cuda`` without a GPU is a
  one-line error before any work, never a silent fall-back to the CPU), ``--import MODULE``
  (repeatable; :func:`import_plugins`), ``--dp`` (:func:`parse_dp`), ``--hp``,
  ``--reuse-stale``, ``--checkpoint-every``, ``--tag``, ``--threads``, ``--tiny``,
  ``--quiet``;
* :func:`catalogue`: the ``--help`` epilogue listing the problems, the algorithms and every
  hyperparameter with its default.

Errors are :class:`CLIError` (one line); each command prints them as
``PROG: error: ...`` and exits with status 2, as ``argparse`` does for a bad flag.
"""
from __future__ import annotations

import argparse
import importlib
import math
import textwrap
from dataclasses import dataclass

#: The ``--partition`` schemes (:func:`sims.data.partition`) and what they take.
PARTITIONS = ("shards", "iid", "dirichlet")


class CLIError(ValueError):
    """A one-line error for the command line."""


# ------------------------------------------------------------------------------ values

def parse_value(text: str):
    """``"0.1"`` -> 0.1, ``"3"`` -> 3, ``"true"`` -> True, ``"none"`` -> None, else the text
    (:func:`sims.data.partition.option_value`, the one parser of option values)."""
    from .data.partition import option_value
    return option_value(text)


def parse_options(text: str, where: str) -> tuple[str, dict]:
    """``"NAME:key=value,key=value"`` (or ``:`` between the settings) -> ``(NAME, {...})``."""
    name, _, rest = str(text).strip().partition(":")
    out = {}
    for item in rest.replace(":", ",").split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"{where}: cannot read {item!r} in {text!r}; expected "
                           "NAME:KEY=VALUE[,KEY=VALUE...]")
        out[key.strip()] = parse_value(val)
    return name.strip().lower(), out


def parse_partition(text: str) -> tuple[str, dict]:
    """``--partition``: ``shards``, ``iid``, ``dirichlet:alpha=0.5[,variant=per_client,
    min_size=2]`` -> ``(scheme, keywords of sims.data.partition)``, checked against the
    scheme's parameters (:func:`sims.data.partition.parse_scheme`; a missing ``alpha`` or an
    unknown option is one line here)."""
    from .data.errors import PartitionError
    from .data.partition import parse_scheme
    try:
        return parse_scheme(text, "--partition")
    except PartitionError as exc:
        raise CLIError(str(exc)) from None


def check_device(device: str | None, flag: str = "--device"):
    """``device`` as a ``torch.device``, or a one-line :class:`CLIError`
    (:func:`sims.core.device.check_device`: never a fall-back to the CPU)."""
    from .core.device import DeviceError
    from .core.device import check_device as check
    try:
        return check(device, flag)
    except DeviceError as exc:
        raise CLIError(str(exc)) from None


# ------------------------------------------------------------------------------ plug-ins

def import_plugins(names) -> list:
    """``--import MODULE`` (repeatable): import the user's modules through
    ``sims.plugins.import_modules`` (their ``register`` calls then name their algorithms,
    problems and models); a module that cannot be imported is one line."""
    names = [str(n).strip() for n in (names or ()) if str(n).strip()]
    if not names:
        return []
    try:
        plugins = importlib.import_module("sims.plugins")
    except ModuleNotFoundError as exc:
        if exc.name not in ("sims.plugins",):
            raise
        raise CLIError("--import needs sims.plugins, which this installation lacks") from None
    try:
        return list(plugins.import_modules(names))
    except CLIError:
        raise
    except plugins.PluginError as exc:     # already one line naming the module
        raise CLIError(" ".join(str(exc).split())) from None
    except Exception as exc:  # noqa: BLE001 - the user's module: any error is one line
        text = " ".join(str(exc).split())
        if not text.startswith("--import"):
            text = f"--import {' '.join(names)}: {type(exc).__name__}: {text}"
        raise CLIError(text) from None


def preimport(argv) -> None:
    """Import the ``--import`` modules of ``argv`` and the installed plug-ins (entry-point
    group ``fedtoolkit.plugins``) before the command's parser is built, so that ``--help``
    and ``--list`` name what they register (one-line :class:`CLIError`)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--import", dest="imports", action="append", default=[])
    known, _ = pre.parse_known_args(list(argv))
    import_plugins(known.imports)
    from .store.extensions import PluginError, load_entry_points
    try:
        load_entry_points()
    except PluginError as exc:              # already one line naming the entry point
        raise CLIError(" ".join(str(exc).split())) from None


# ------------------------------------------------------------------------------ DP

@dataclass(frozen=True)
class DPOptions:
    """``--dp clip=C,sigma=S[,delta=D][,accountant=rdp|pld]`` or
    ``--dp clip=C,epsilon=E,delta=D[,accountant=pld]``: user-level DP
    (:class:`sims.privacy.Private`) with the sampling rate derived from the participation
    (``q=Q`` typed by hand is checked against it: a mismatch is one line)."""
    clip: float
    sigma: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    accountant: str = "rdp"
    sampling_rate: float | None = None      # typed by hand: checked against m / N

    def describe(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}

    def wrap(self, algorithm, participation, n_clients: int, rounds: int):
        """``algorithm`` under DP for this run (noise calibrated to ``epsilon`` over
        ``rounds`` where a target is given)."""
        from .privacy import Private, PrivacyError, sampling_rate_of
        if self.sampling_rate is not None:
            q = sampling_rate_of(participation, n_clients)
            if not math.isclose(self.sampling_rate, q, rel_tol=1e-9):
                what = {"fixed": f"m={participation.m} of ",
                        "bernoulli": f"p={participation.p} of "}.get(participation.kind,
                                                                    "all ")
                raise PrivacyError(f"--dp q={self.sampling_rate:g} does not match the "
                                   f"participation ({what}N={n_clients} clients: q={q:g}); "
                                   "leave q out to derive it")
        return Private.for_participation(algorithm, participation, n_clients, clip=self.clip,
                                         noise_multiplier=self.sigma, epsilon=self.epsilon,
                                         delta=self.delta, rounds=rounds,
                                         accountant=self.accountant)

    def note(self, participation, n_clients: int, rounds: int, sigma: float) -> str | None:
        """The run-time note on fixed-``m`` sampling against the accountant's Poisson
        assumption (None without ``delta``, or where participation is not a fixed ``m``)."""
        from .privacy import sampling_note
        if self.delta is None or participation.kind != "fixed":
            return None
        return sampling_note(n_clients, participation.m, sigma, rounds, self.delta,
                             self.accountant)


_DP_KEYS = {"clip": "clip", "c": "clip", "sigma": "sigma", "noise_multiplier": "sigma",
            "noise": "sigma", "epsilon": "epsilon", "eps": "epsilon", "delta": "delta",
            "accountant": "accountant", "q": "sampling_rate", "sampling_rate": "sampling_rate"}


def parse_dp(text: str | None) -> DPOptions | None:
    """``--dp`` text -> :class:`DPOptions` (None when not given); one-line errors."""
    if text is None or not str(text).strip():
        return None
    from .privacy import ACCOUNTANTS
    _, kw = parse_options(":" + str(text), "--dp")
    opts = {}
    for key, val in kw.items():
        if key not in _DP_KEYS:
            raise CLIError(f"--dp: unknown key {key!r}; use clip, sigma (noise_multiplier), "
                           "epsilon, delta, accountant, q (checked against m/N)")
        opts[_DP_KEYS[key]] = val
    for key in ("clip", "sigma", "epsilon", "delta", "sampling_rate"):
        if key in opts and (isinstance(opts[key], bool)
                            or not isinstance(opts[key], (int, float))):
            raise CLIError(f"--dp: {key} takes a number, got {opts[key]!r}")
    if "clip" not in opts:
        raise CLIError("--dp needs clip=C (the L2 bound of each client's update), e.g. "
                       "--dp clip=1,sigma=1 or --dp clip=1,epsilon=8,delta=1e-5")
    if not opts["clip"] > 0 or math.isnan(opts["clip"]):
        raise CLIError(f"--dp: clip must be > 0, got {opts['clip']}")
    if ("sigma" in opts) == ("epsilon" in opts):
        raise CLIError("--dp: give either sigma=S (the noise multiplier) or a target "
                       "epsilon=E with delta=D, not both or neither")
    if "sigma" in opts and not (math.isfinite(opts["sigma"]) and opts["sigma"] >= 0):
        raise CLIError(f"--dp: sigma must be a finite number >= 0, got {opts['sigma']}")
    if "epsilon" in opts:
        if "delta" not in opts:
            raise CLIError("--dp: a target epsilon needs delta=D, e.g. delta=1e-5")
        if not (math.isfinite(opts["epsilon"]) and opts["epsilon"] > 0):
            raise CLIError(f"--dp: epsilon must be a finite number > 0, got {opts['epsilon']}")
    if "delta" in opts and not 0 < opts["delta"] < 1:
        raise CLIError(f"--dp: delta must be in (0, 1), got {opts['delta']}")
    if "sampling_rate" in opts and not 0 < opts["sampling_rate"] <= 1:
        raise CLIError(f"--dp: q must be in (0, 1], got {opts['sampling_rate']}")
    acc = str(opts.get("accountant", "rdp")).lower()
    if acc not in ACCOUNTANTS:
        raise CLIError(f"--dp: accountant must be one of {', '.join(ACCOUNTANTS)}, got {acc!r} "
                       "(PRV is not available here)")
    opts["accountant"] = acc
    return DPOptions(**{k: (float(v) if k != "accountant" else v) for k, v in opts.items()})


# ------------------------------------------------------------------------------ parsers

def add_problem_args(p: argparse.ArgumentParser, defaults) -> None:
    """The problem flags (``defaults``: a :class:`sims.experiments.compare.Config`)."""
    g = p.add_argument_group("problem")
    g.add_argument("--problem", default=defaults.problem,
                   help="quadratic, DATASET-MODEL (e.g. mnist-mlp) or arrays:PATH.npz "
                        "(default %(default)s; the list is below)")
    g.add_argument("--participation", default=defaults.participation,
                   help="full, m=M (a fixed M a round) or p=P (default %(default)s)")
    g.add_argument("--n-clients", type=int, default=defaults.n_clients,
                   help="clients (default %(default)s)")
    g.add_argument("--partition", default=defaults.partition,
                   help="shards, iid or dirichlet:alpha=A[,variant=per_client,min_size=N] "
                        "(default %(default)s)")
    g.add_argument("--dim", type=int, default=defaults.dim, help="quadratic dimension")
    g.add_argument("--local-steps", type=int, default=None,
                   help="fixed local steps K (quadratic default 5; data problems: epochs)")
    g.add_argument("--local-epochs", type=int, default=defaults.local_epochs)
    g.add_argument("--batch-size", type=int, default=defaults.batch_size)
    g.add_argument("--noise", default=defaults.noise,
                   help="quadratic noise: gaussian, student_t, cauchy, laplace, none")
    g.add_argument("--df", type=float, default=None, help="Student-t degrees of freedom")
    g.add_argument("--sigma", type=float, default=defaults.sigma, help="quadratic noise scale")
    g.add_argument("--heterogeneity", type=float, default=defaults.heterogeneity)
    g.add_argument("--dtype", default=None, help="float32 or float64")
    g.add_argument("--data-dir", default=None)
    g.add_argument("--loss", default=None,
                   help="arrays problems: cross_entropy, mse or bce (default: cross_entropy "
                        "for integer labels, mse otherwise)")
    g.add_argument("--model", default=None,
                   help="arrays problems: mlp (one hidden layer of 64, default) or logreg")
    g.add_argument("--eval-every", type=int, default=defaults.eval_every)
    g.add_argument("--eval-train-samples", type=int, default=defaults.eval_train_samples)


def add_run_args(p: argparse.ArgumentParser, *, checkpoint: float | None = 600.0,
                 tag: str | None = None, threads_default=None, threads_help="torch threads"
                 ) -> None:
    """The flags every run command shares."""
    g = p.add_argument_group("run")
    g.add_argument("--hp", action="append", default=[],
                   help="[ALG.]KEY=VALUE hyperparameter (repeatable; ALG. limits it to one "
                        "algorithm)")
    g.add_argument("--device", default="cpu",
                   help="cpu or cuda[:N]: where the problem and the runs live (default cpu; "
                        "cuda without a GPU is an error, never a fall-back)")
    g.add_argument("--dp", default=None, metavar="clip=C,sigma=S|epsilon=E,delta=D",
                   help="user-level DP: clip each client's update to C and add Gaussian noise "
                        "(sigma=S, or calibrated to epsilon=E at delta=D), accountant=rdp "
                        "(default) or pld; the sampling rate is m/N of --participation")
    g.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first (repeatable): its sims.plugins.register calls "
                        "add algorithms, problems and models")
    if tag is not None:
        g.add_argument("--tag", default=tag, help="file name stem (default %(default)s)")
    g.add_argument("--reuse-stale", action="store_true",
                   help="reuse saved runs computed by other code (and say so)")
    if checkpoint is not None:
        g.add_argument("--checkpoint-every", type=float, default=checkpoint,
                       help="seconds between checkpoints of a running run (0: none; default "
                            "%(default)s)")
    g.add_argument("--threads", type=int, default=threads_default, help=threads_help)
    g.add_argument("--tiny", action="store_true", help="seconds-long smoke run")
    g.add_argument("--quiet", action="store_true", help="no progress bars")


def catalogue(width: int = 100) -> str:
    """The ``--help`` epilogue: problems, partitions, algorithms and their hyperparameters
    with defaults."""
    from .algorithms.registry import hyperparameters, list_algorithms
    from .data import DATASETS
    from .problems.models import MODELS
    lines = ["problems:",
             "  quadratic                  heterogeneous quadratic (--dim, --noise, --sigma, "
             "--heterogeneity)",
             f"  DATASET-MODEL              DATASET in {', '.join(DATASETS)};",
             f"                             MODEL in {', '.join(MODELS)}",
             "  arrays:PATH.npz            your arrays: keys x, y (optionally x_test, y_test); "
             "--loss",
             "                             cross_entropy/mse/bce; --model mlp (default) or "
             "logreg",
             *_registered_problems(),
             "partitions: shards, iid, dirichlet:alpha=A[,variant=per_client][,min_size=N]",
             "", "algorithms (hyperparameter=default):"]
    for name, desc in list_algorithms().items():
        lines.append(f"  {name:16s} {desc}")
        hyper = ", ".join(f"{k}={v}" for k, v in hyperparameters(name).items())
        lines += textwrap.wrap(hyper, width, initial_indent=" " * 19,
                               subsequent_indent=" " * 19)
    return "\n".join(lines)


def _registered_problems() -> list[str]:
    """Lines naming the problems plug-ins registered (``sims.problems.registry``, where this
    installation has it)."""
    try:
        registry = importlib.import_module("sims.problems.registry")
    except ModuleNotFoundError:
        return []
    names = list(getattr(registry, "list_problems", lambda: [])())
    return [f"  {name:26s} registered by a plug-in" for name in names]


def fail(prog: str, exc: BaseException) -> int:
    """Print ``PROG: error: message`` (one line) to stderr; the exit status 2."""
    import sys
    print(f"{prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
    return 2

"""Compare any set of algorithms on any problem: ``python -m sims.compare``.

::

    python -m sims.compare --algorithms fedavg,fedadam,fedlada --problem quadratic \\
        --rounds 100 --seeds 3 --participation m=10 --out results/compare \\
        --figures figures/compare

Every algorithm runs on the batched engine (:func:`sims.core.engine.run`) over the same seeds,
so all of them see the same initial models, participants and minibatches. Each run's curves
are saved as a tidy CSV with a JSON provenance record (:mod:`sims.store.results`); one figure
shows the loss and the accuracy (on a quadratic: the suboptimality and the squared gradient
norm) against rounds and against communicated bits; a summary table (final metrics, bits per
round up and down, client memory in floats) is printed and saved.

* ``--algorithms`` is a comma-separated list of registry names
  (:mod:`sims.algorithms.registry`), each optionally followed by ``:key=value`` settings,
  e.g. ``fedlada:alpha=0.05:eta_l=0.003,localadam``. ``--hp [ALG.]KEY=VALUE`` (repeatable)
  sets a hyperparameter for one algorithm, or for every algorithm that has it.
* ``--problem``: a problem registered by a plug-in (:mod:`sims.plugins`,
  :mod:`sims.problems.registry`), ``quadratic`` (heterogeneous quadratic with Gaussian,
  Student-t or Cauchy noise, ``--noise``), or ``DATASET-MODEL`` with a dataset of :mod:`sims.data`
  (``mnist``, ``mnist-subset``, ``fmnist``, ``cifar10``, ``cifar100``) and a model of
  :mod:`sims.problems.models` (``logreg``, ``mlp``, ``cnn``): ``mnist-mlp``, ``fmnist-cnn``, ...,
  or ``arrays:PATH.npz``: the user's arrays (:mod:`sims.problems.arrays`; ``--loss``,
  ``--model mlp|logreg``). ``--partition`` takes options: ``dirichlet:alpha=0.5``.
* ``--device cpu|cuda``: where the problem lives (``cuda`` without a GPU: one line, before any
  work); ``--dp clip=C,sigma=S`` or ``--dp clip=C,epsilon=E,delta=D[,accountant=pld]``:
  every algorithm under user-level DP (:class:`sims.privacy.Private`, the sampling rate
  ``m / N`` of ``--participation``); ``--import MODULE``: the user's plug-ins first. The flags
  are shared with ``python -m sims.sweep`` (:mod:`sims.cli`).
* ``--bits up`` (default; the engine's ``bits_up``: cumulative uplink bits per client) or
  ``total`` (uplink plus downlink) for the x-axis of the bits panels.
* ``--tiny``: a seconds-long run (tests, smoke checks); its figures go to ``OUT/figures``
  unless ``--figures`` is given.

Results discipline (:mod:`sims.store.runstore`, shared with the ``reproduce`` entries): a run's files
are ``OUT/TAG_LABEL_T{rounds}_{hash}.csv`` (+ ``.json``), ``hash`` the start of its config
fingerprint (problem, participation, seeds, rounds, the algorithm and its hyperparameters), so
comparisons of other problems or settings in the same ``--out`` never overwrite each other;
the summary is ``TAG_summary_{hash}.csv`` for this set of runs. A rerun reuses the runs that
are saved and were computed by this code (and says so), recomputes those of other code unless
``--reuse-stale``, waits for a run another process is computing, and resumes an interrupted
run from its checkpoint (``--checkpoint-every`` seconds, default 600; 0: none). A replica
whose loss or parameters blow up (:mod:`sims.core.engine`) is counted in the summary's
``diverged``, left out of its final metrics and the figure's means, and marked x in the figure.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .. import cli
from ..core import engine
from ..core.interrupts import restore as restore_interrupts
from ..algorithms.registry import (AlgorithmError, canonical, client_memory, hyperparameters,
                                  list_algorithms, make_algorithm, with_population)
from ..store.checkpoint import interrupted_message, write_failed_message
from ..data import DATASETS, DataError
from ..store.digest import record_of as data_record
from ..problems.models import MODELS
from ..core.participation import Participation, ParticipationError
from ..store.results import atomic_write_bytes, provenance, tidy, wall_time_fields
from ..store.runstore import FolderError, RunStore, check_folder

NOISES = ("gaussian", "student_t", "cauchy", "laplace", "none")


class CompareError(Exception):
    """A one-line error for the command line."""


@dataclass
class Config:
    algorithms: str = "fedavg,fedadam,fedlada"
    problem: str = "quadratic"
    rounds: int = 50
    seeds: int = 2
    seed0: int = 0
    participation: str = "m=10"
    n_clients: int = 50
    dim: int = 50
    local_steps: int | None = None
    local_epochs: int = 1
    batch_size: int = 32
    partition: str = "shards"
    noise: str = "gaussian"
    df: float | None = None
    sigma: float = 1.0
    heterogeneity: float = 1.0
    dtype: str | None = None
    data_dir: str | None = None
    eval_every: int = 1
    eval_train_samples: int | None = 5000
    bits: str = "up"
    hp: tuple = ()
    out: str = "results/compare"
    figures: str | None = None       # default figures/compare (--tiny: OUT/figures)
    tag: str = "compare"
    threads: int | None = None
    tiny: bool = False
    quiet: bool = False
    reuse_stale: bool = False
    checkpoint_every: float = 600.0
    device: str = "cpu"
    dp: str | None = None            # --dp text (sims.cli.parse_dp)
    imports: tuple = ()              # --import MODULE (sims.plugins)
    loss: str | None = None          # arrays problems: cross_entropy, mse, bce
    model: str | None = None         # arrays problems: mlp (default) or logreg


# ------------------------------------------------------------------------------ parsing

parse_value = cli.parse_value


def _key_values(items, where: str) -> dict:
    out = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise CompareError(f"cannot read {item!r} in {where}; expected KEY=VALUE")
        out[key.strip()] = parse_value(val)
    return out


def parse_algorithms(text: str, hp=()) -> list[tuple[str, str, dict]]:
    """``[(label, registry name, hyperparameters)]`` from ``--algorithms`` and ``--hp``."""
    specs = [s.strip() for s in str(text).split(",") if s.strip()]
    if not specs:
        raise CompareError("--algorithms is empty; give a comma-separated list of names "
                           f"from: {', '.join(list_algorithms())}")
    common, per = {}, {}
    for item in hp:
        key, sep, val = item.partition("=")
        if not sep:
            raise CompareError(f"cannot read --hp {item!r}; expected [ALG.]KEY=VALUE")
        alg, dot, name = key.rpartition(".")
        target = per.setdefault(canonical(alg), {}) if dot else common
        target[name.strip()] = parse_value(val)
    out, labels = [], set()
    for spec in specs:
        name, *settings = spec.split(":")
        name = canonical(name)
        try:
            valid = hyperparameters(name)
        except AlgorithmError as exc:
            raise CompareError(str(exc)) from None
        hyper = {k: v for k, v in common.items() if k in valid}
        hyper.update(per.get(name, {}))
        hyper.update(_key_values(settings, spec))
        for key, val in hyper.items():
            default = valid.get(key)
            if (isinstance(default, (int, float)) and not isinstance(default, bool)
                    and isinstance(val, str)):
                raise CompareError(f"{name}: {key} takes a number, got {val!r}")
        label = spec if spec not in labels else f"{spec}#{len(out)}"
        labels.add(label)
        out.append((label, name, hyper))
    unknown_targets = set(per) - {name for _, name, _ in out}
    if unknown_targets:
        raise CompareError(f"--hp names algorithm(s) not being run: "
                           f"{', '.join(sorted(unknown_targets))}")
    return out


def _dtype(cfg: Config, default):
    if cfg.dtype is None:
        return default
    if cfg.dtype not in ("float32", "float64"):
        raise CompareError(f"--dtype must be float32 or float64, got {cfg.dtype!r}")
    return getattr(torch, cfg.dtype)


def _partition(cfg: Config) -> tuple[str, dict]:
    try:
        return cli.parse_partition(cfg.partition)
    except cli.CLIError as exc:
        raise CompareError(str(exc)) from None


def _device(cfg: Config):
    try:
        return cli.check_device(cfg.device)
    except cli.CLIError as exc:
        raise CompareError(str(exc)) from None


ARRAY_MODELS = {"mlp": 64, "logreg": 0}      # arrays problems: hidden units of the default MLP


def build_problem(cfg: Config):
    """The problem named by ``cfg.problem``, on ``cfg.device``: ``arrays:PATH.npz``, a
    registered plug-in problem (:mod:`sims.problems.registry`), ``quadratic`` or
    ``DATASET-MODEL``."""
    from ..problems import registry as problems
    device = _device(cfg)
    if cfg.problem.strip().lower().startswith("arrays:"):
        return _arrays_problem(cfg, device)
    if cfg.loss is not None or cfg.model is not None:
        raise CompareError("--loss and --model apply to --problem arrays:PATH.npz only")
    name = cfg.problem.strip().lower()
    if problems.lookup(name) is not None:
        settings = {k: getattr(cfg, k) for k in problems.SETTINGS if hasattr(cfg, k)}
        settings["dtype"] = _dtype(cfg, None)
        try:
            return problems.build(name, settings)
        except DataError as exc:
            raise CompareError(" ".join(str(exc).split())) from None
        except (ValueError, TypeError) as exc:
            raise CompareError(f"cannot build {cfg.problem!r}: {' '.join(str(exc).split())}") \
                from None
    if name == "quadratic":
        from ..problems.quadratic import heterogeneous_quadratic
        if cfg.noise not in NOISES:
            raise CompareError(f"--noise must be one of {', '.join(NOISES)}, got {cfg.noise!r}")
        if cfg.noise == "student_t" and not (cfg.df and cfg.df > 0):
            raise CompareError("--noise student_t needs --df > 0")
        if cfg.n_clients < 1 or cfg.dim < 1:
            raise CompareError(f"--n-clients and --dim must be >= 1, got {cfg.n_clients}, "
                               f"{cfg.dim}")
        return heterogeneous_quadratic(cfg.n_clients, cfg.dim, sigma=cfg.sigma,
                                       heterogeneity=cfg.heterogeneity, seed=12345,
                                       local_steps=cfg.local_steps or 5, noise=cfg.noise,
                                       df=cfg.df, x0=1.0, dtype=_dtype(cfg, torch.float64),
                                       device=device)
    dataset, model = split_problem(name)
    if dataset is None:
        extra = problems.list_problems()
        raise CompareError(f"unknown problem {cfg.problem!r}; use quadratic or DATASET-MODEL "
                           f"with DATASET in {', '.join(DATASETS)} and MODEL in "
                           f"{', '.join(MODELS)}"
                           + (f", or a registered problem: {', '.join(extra)}" if extra else ""))
    from ..problems.image import build_image_problem
    scheme, partition_kw = _partition(cfg)
    try:
        return build_image_problem(dataset, model, cfg.n_clients, scheme=scheme,
                                   partition_kw=partition_kw,
                                   data_dir=cfg.data_dir, batch_size=cfg.batch_size,
                                   local_epochs=cfg.local_epochs, local_steps=cfg.local_steps,
                                   eval_train_samples=cfg.eval_train_samples,
                                   dtype=_dtype(cfg, torch.float32), device=device)
    except DataError as exc:
        raise CompareError(" ".join(str(exc).split())) from None
    except ValueError as exc:
        raise CompareError(f"cannot build {cfg.problem!r}: {' '.join(str(exc).split())}") \
            from None


def split_problem(name: str) -> tuple[str | None, str | None]:
    """``DATASET-MODEL`` split where both parts are known (model names may hold a ``-``:
    ``fmnist-mlp-dropout``); ``(None, None)`` when no split is."""
    for i, ch in enumerate(name):
        if ch == "-" and name[:i] in DATASETS and name[i + 1:] in MODELS:
            return name[:i], name[i + 1:]
    return None, None


def _arrays_problem(cfg: Config, device):
    """``--problem arrays:PATH.npz``: :func:`sims.problems.arrays.problem_from_file`."""
    from ..problems.arrays import problem_from_file
    path = cfg.problem.strip()[len("arrays:"):]
    model = (cfg.model or "mlp").strip().lower()
    if model not in ARRAY_MODELS:
        raise CompareError(f"--model {model!r}: arrays problems take "
                           f"{' or '.join(ARRAY_MODELS)}; for your own module use "
                           "sims.problems.arrays.problem_from_arrays from Python")
    try:
        return problem_from_file(path, partition=cfg.partition, n_clients=cfg.n_clients,
                                 loss=cfg.loss, batch_size=cfg.batch_size,
                                 local_epochs=cfg.local_epochs, local_steps=cfg.local_steps,
                                 eval_train_samples=cfg.eval_train_samples,
                                 hidden=ARRAY_MODELS[model], device=device,
                                 dtype=_dtype(cfg, torch.float32))
    except DataError as exc:
        raise CompareError(" ".join(str(exc).split())) from None
    except ValueError as exc:
        raise CompareError(f"cannot build {cfg.problem!r}: {' '.join(str(exc).split())}") \
            from None


def dp_options(cfg: Config):
    """``cfg.dp`` read (:func:`sims.cli.parse_dp`), or None."""
    try:
        return cli.parse_dp(cfg.dp)
    except cli.CLIError as exc:
        raise CompareError(str(exc)) from None


def apply_tiny(cfg: Config, explicit=frozenset()) -> None:
    """The ``--tiny`` preset: a few rounds of a small problem, one seed. Settings named in
    ``explicit`` (the flags given on the command line) are kept as given."""
    tiny = {"rounds": min(cfg.rounds, 3), "seeds": 1, "n_clients": min(cfg.n_clients, 8),
            "dim": min(cfg.dim, 10), "local_steps": cfg.local_steps or 2,
            "eval_train_samples": 200}
    if cfg.participation.startswith(("m=", "fixed")):
        tiny["participation"] = "m=3"
    for key, value in tiny.items():
        if key not in explicit:
            setattr(cfg, key, value)


def explicit_flags(parser: argparse.ArgumentParser, args) -> frozenset:
    """The settings given on the command line (those whose value is not the default)."""
    return frozenset(k for k, v in vars(args).items() if v != parser.get_default(k))


def validate(cfg: Config) -> None:
    if cfg.rounds < 1:
        raise CompareError(f"--rounds must be >= 1, got {cfg.rounds}")
    if cfg.seeds < 1:
        raise CompareError(f"--seeds must be >= 1, got {cfg.seeds}")
    if cfg.seed0 < 0:
        raise CompareError(f"--seed0 must be >= 0, got {cfg.seed0}")
    if not (cfg.sigma >= 0 and math.isfinite(cfg.sigma)):
        raise CompareError(f"--sigma must be >= 0, got {cfg.sigma:g}")
    if not (cfg.heterogeneity >= 0 and math.isfinite(cfg.heterogeneity)):
        raise CompareError(f"--heterogeneity must be >= 0, got {cfg.heterogeneity:g}")
    if cfg.df is not None and not cfg.df > 0:
        raise CompareError(f"--df must be > 0, got {cfg.df:g}")
    if cfg.eval_train_samples is not None and cfg.eval_train_samples < 1:
        raise CompareError(f"--eval-train-samples must be >= 1 (the training loss is "
                           f"estimated on that many samples), got {cfg.eval_train_samples}")
    if cfg.threads is not None and cfg.threads < 0:
        raise CompareError(f"--threads must be >= 0, got {cfg.threads}")
    if not cfg.checkpoint_every >= 0:                       # NaN too
        raise CompareError(f"--checkpoint-every must be >= 0 seconds (0: none), got "
                           f"{cfg.checkpoint_every:g}")
    if not re.fullmatch(r"[A-Za-z0-9._=-]+", str(cfg.tag)) or set(str(cfg.tag)) <= {"."}:
        raise CompareError(f"--tag must be a plain file-name stem (letters, digits, . _ = -), "
                           f"got {cfg.tag!r}")
    try:
        Participation.parse(cfg.participation)
    except ParticipationError as exc:
        raise CompareError(f"--participation: {exc}") from None
    if cfg.batch_size < 1 or cfg.local_epochs < 1:
        raise CompareError(f"--batch-size and --local-epochs must be >= 1, got "
                           f"{cfg.batch_size}, {cfg.local_epochs}")
    if cfg.eval_every < 1:
        raise CompareError(f"--eval-every must be >= 1, got {cfg.eval_every}")
    if cfg.bits not in ("up", "total"):
        raise CompareError(f"--bits must be 'up' or 'total', got {cfg.bits!r}")
    if cfg.local_steps is not None and cfg.local_steps < 1:
        raise CompareError(f"--local-steps must be >= 1, got {cfg.local_steps}")
    _device(cfg)
    _partition(cfg)
    dp_options(cfg)


def dp_summary(dp, private, participation, n_clients: int, rounds: int) -> str:
    """What ``--dp`` does in this run, and the note on fixed-``m`` sampling against the
    accountant's Poisson assumption (epsilon under both)."""
    sigma = private.noise_multiplier
    how = (f"calibrated to epsilon {dp.epsilon:g} at delta {dp.delta:g} over {rounds} rounds "
           f"({dp.accountant.upper()})" if dp.epsilon is not None else "as given")
    line = (f"DP: clip {dp.clip:g}, noise multiplier {sigma:.6g} ({how}), "
            + (f"sampling rate q={private.sampling_rate:g}, epsilon recorded each round "
               f"({dp.accountant.upper()})" if private.sampling_rate is not None else
               "no delta given: epsilon not recorded"))
    note = dp.note(participation, n_clients, rounds, sigma)
    return line + ("\n" + note if note else "")


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", label).strip("_") or "run"


_NOT_RESULTS = {"algorithms", "hp", "out", "figures", "tag", "threads", "tiny", "quiet",
                "reuse_stale", "checkpoint_every", "bits", "device", "imports"}
#: Settings left out of a run's key at their default, so runs saved before they existed keep
#: their fingerprints (and files).
_OMITTED_AT_DEFAULT = {"dp": None, "loss": None, "model": None}


def run_key(cfg: Config, label: str, name: str, hyper: dict) -> dict:
    """What one run's results depend on: the comparison's settings (not its output folders,
    threads, device or the other algorithms) and this algorithm with its hyperparameters."""
    settings = {k: v for k, v in asdict(cfg).items() if k not in _NOT_RESULTS
                and not (k in _OMITTED_AT_DEFAULT and v == _OMITTED_AT_DEFAULT[k])}
    return {"settings": settings, "label": label, "algorithm": name, "hyper": hyper}


def run_stem(cfg: Config, label: str, config_fp: str) -> str:
    return f"{cfg.tag}_{_slug(label)}_T{cfg.rounds}_{config_fp[:8]}"


def figures_dir(cfg: Config) -> Path:
    if cfg.figures:
        return Path(cfg.figures)
    return Path(cfg.out) / "figures" if cfg.tiny else Path("figures/compare")


# ------------------------------------------------------------------------------ running

def run_all(cfg: Config):
    """Run every algorithm; returns the combined tidy table and the summary rows."""
    try:
        cli.import_plugins(cfg.imports)     # the user's algorithms and problems first
    except cli.CLIError as exc:
        raise CompareError(str(exc)) from None
    validate(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    specs = parse_algorithms(cfg.algorithms, cfg.hp)
    dp = dp_options(cfg)
    try:
        participation = Participation.parse(cfg.participation)
    except ParticipationError as exc:
        raise CompareError(str(exc)) from None
    problem = build_problem(cfg)
    try:
        participation.check(problem.n_clients)
    except ParticipationError as exc:
        raise CompareError(str(exc)) from None
    seeds = list(range(cfg.seed0, cfg.seed0 + cfg.seeds))
    out_dir = Path(cfg.out)
    algorithms = []                       # build them all first: bad settings fail at once
    for label, name, hyper in specs:
        hyper = with_population(name, hyper, problem.n_clients)
        try:
            alg = make_algorithm(name, **hyper)
        except AlgorithmError as exc:
            raise CompareError(str(exc)) from None
        if dp is not None:
            alg = dp.wrap(alg, participation, problem.n_clients, cfg.rounds)
        algorithms.append((label, name, hyper, alg))
    if dp is not None:
        print(dp_summary(dp, algorithms[0][3], participation, problem.n_clients, cfg.rounds),
              flush=True)
    try:
        check_folder(out_dir, "--out")
        check_folder(figures_dir(cfg), "--figures")
    except FolderError as exc:
        raise CompareError(str(exc)) from None
    store = RunStore(out_dir, reuse_stale=cfg.reuse_stale, checkpoint_every=cfg.checkpoint_every,
                     say=lambda line: print(line, flush=True))
    keys = [(label, _fp(run_key(cfg, label, name, hyper))) for label, name, hyper, _ in algorithms]
    saved = {label: store.lookup(run_stem(cfg, label, fp), fp) for label, fp in keys}
    store.report()
    frames, summary = [], []
    for (label, name, hyper, alg), (_, fp) in zip(algorithms, keys):
        up, down = alg.uplink_bits(problem.layout), alg.downlink_bits(problem.layout)
        memory = client_memory(alg, problem.layout)
        stem = run_stem(cfg, label, fp)
        found = saved[label]
        if found is None:
            with store.lock(stem, label):
                found = RunStore(out_dir).lookup(stem, fp)
                if found is not None:
                    store.say(f"run {label}: computed meanwhile by another process; reused")
                else:
                    df, wall = _compute(cfg, problem, alg, participation, seeds, store, stem,
                                        fp, label, name, (up, down, memory))
        if found is not None:
            df, wall = found.df, float(found.record.get("wall_time_s", math.nan))
        frames.append(df)
        summary.append(_summary_row(label, df, up, down, memory, problem.d, wall))
    table = pd.concat(frames, ignore_index=True)
    summary_df = pd.DataFrame(summary)
    atomic_write_bytes(summary_path(cfg, [fp for _, fp in keys]),
                       summary_df.to_csv(index=False).encode())
    return table, summary_df


def _fp(key: dict) -> str:
    blob = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def summary_path(cfg: Config, fingerprints) -> Path:
    """The summary of this set of runs: ``TAG_summary_{hash of the runs' fingerprints}``."""
    digest = hashlib.sha256("|".join(fingerprints).encode()).hexdigest()[:8]
    return Path(cfg.out) / f"{cfg.tag}_summary_{digest}.csv"


def _compute(cfg, problem, alg, participation, seeds, store, stem, fp, label, name, costs):
    """Run one algorithm (checkpointed, resuming from a checkpoint) and save its results."""
    up, down, memory = costs
    bar = _progress(cfg, label)
    started, wall_started = time.perf_counter(), time.time()
    ckpt = store.checkpointer(stem, fp)
    if ckpt is not None and (resume_at := ckpt.saved_round()):
        store.say(f"run {label}: resuming from its checkpoint at round {resume_at}")
        if bar:
            bar.update(resume_at)
    try:
        output = engine.run(problem, alg, participation, cfg.rounds, seeds,
                            eval_every=cfg.eval_every, checkpoint=ckpt,
                            progress=(lambda t, b=bar: b.update(1)) if bar else None)
    finally:
        if bar:
            bar.close()
    here = time.perf_counter() - started
    resumed = [] if ckpt is None or not ckpt.resumed_from else [ckpt.resumed_from]
    timing = wall_time_fields(here, resumed, ckpt.resumed_elapsed if resumed else 0.0)
    wall = timing["wall_time_s"]
    params = {"algorithm": label, "name": name, "problem": cfg.problem}
    df = tidy(output, label, params)
    record = provenance(asdict(cfg) | {"hp": list(cfg.hp)}, seeds, wall, {
        "algorithm": alg.describe(), "label": label, "participation":
        participation.describe(), "bits_up_per_round": up, "bits_down_per_round": down,
        "client_memory_floats": memory, "d": problem.d,
        "diverged_at": output.diverged_at, "blowup": engine.BLOWUP,
        "data": data_record(problem),
        "resumed_from_round": None if ckpt is None else ckpt.resumed_from, **timing},
        started=wall_started)
    store.save(df, record, stem, fp)
    if ckpt is not None:
        ckpt.clear()
    return df, wall


def _progress(cfg, label):
    if cfg.quiet:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=cfg.rounds, desc=label, unit="round", file=sys.stderr, leave=True)


def _healthy(df):
    return df[df["diverged_at"].isna()] if "diverged_at" in df else df


def _final(df, metric):
    """Mean over the healthy seeds at the last round (NaN when every seed diverged)."""
    sub = _healthy(df)
    sub = sub[sub.metric == metric]
    if sub.empty:
        return math.nan
    last = sub[sub["round"] == sub["round"].max()]
    return float(last["value"].mean())


def _summary_row(label, df, up, down, memory, d, wall):
    diverged = (df.loc[df["diverged_at"].notna(), "seed"].nunique()
                if "diverged_at" in df else 0)
    row = {"algorithm": label, "bits_up_per_round": up, "bits_down_per_round": down,
           "client_memory_floats": memory, "client_memory_in_d": memory / d,
           "wall_s": round(wall, 3), "diverged": int(diverged)}
    for metric in ("train_loss", "suboptimality", "grad_norm2", "test_acc", "test_loss"):
        if (df.metric == metric).any():
            row[f"final_{metric}"] = _final(df, metric)
    return row


# ------------------------------------------------------------------------------ figure

def with_bits(table: pd.DataFrame, which: str = "up") -> pd.DataFrame:
    """Add a ``bits`` column (cumulative bits per client at that round; 0 at round 0)."""
    names = ["bits_up"] + (["bits_down"] if which == "total" else [])
    bits = (table[table.metric.isin(names)]
            .groupby(["run", "seed", "round"])["value"].sum().rename("bits").reset_index())
    zero = bits.groupby(["run", "seed"]).size().reset_index()[["run", "seed"]]
    zero["round"], zero["bits"] = 0, 0.0
    bits = pd.concat([zero, bits], ignore_index=True)
    return table.merge(bits, on=["run", "seed", "round"], how="left")


def plot(table: pd.DataFrame, cfg: Config) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.ticker import NullFormatter

    sns.set_theme(context="paper", style="whitegrid", font_scale=1.0)
    data = with_bits(table, cfg.bits)
    bad = data[data["diverged_at"].notna()] if "diverged_at" in data else data.iloc[:0]
    data = _healthy(data)
    has_acc = (data.metric == "test_acc").any()
    if has_acc:
        rows = [("train_loss", "train loss", False), ("test_acc", "test accuracy", False)]
    elif (data.metric == "suboptimality").any():
        rows = [("suboptimality", "f(x) - f*", True), ("grad_norm2", "||grad f(x)||^2", True)]
    else:                          # a regression / multi-label problem: losses
        rows = [("train_loss", "train loss", False),
                ("test_loss" if (data.metric == "test_loss").any() else "grad_norm2",
                 "test loss" if (data.metric == "test_loss").any() else "||grad f(x)||^2",
                 False)]
    runs = list(dict.fromkeys(table["run"]))
    colors = dict(zip(runs, sns.color_palette("tab10", max(len(runs), 1))))
    fig, axes = plt.subplots(2, 2, figsize=(10, 7), squeeze=False)
    for i, (metric, ylabel, logy) in enumerate(rows):
        sub = data[data.metric == metric]
        for j, x in enumerate(("round", "bits")):
            ax = axes[i][j]
            for run in runs:
                grp = sub[sub.run == run]
                if grp.empty:
                    continue
                if x == "bits":
                    grp = grp[grp["bits"] > 0]           # round 0 has no place on a log axis
                table_ = grp.pivot_table(index="round", columns="seed", values="value")
                xs = grp.groupby("round")[x].mean().reindex(table_.index).to_numpy()
                mean = table_.mean(axis=1).to_numpy()
                std = table_.std(axis=1).fillna(0).to_numpy()
                lo, hi = mean - std, mean + std
                if logy:
                    pos = mean[mean > 0]
                    floor = pos.min() * 1e-2 if len(pos) else 1e-12
                    lo = np.maximum(lo, floor)
                ax.plot(xs, mean, color=colors[run], lw=1.5, label=run)
                ax.fill_between(xs, lo, hi, color=colors[run], alpha=0.2, lw=0)
            _mark_diverged(ax, bad[bad.metric == metric], x, colors, logy)
            if logy:
                ax.set_yscale("log")
            if x == "bits" and (sub["bits"] > 0).any():
                ax.set_xscale("log")          # compressors differ by orders of magnitude
            ax.set_ylabel(ylabel)
            ax.set_xlabel("round" if x == "round" else
                          ("uplink bits per client" if cfg.bits == "up"
                           else "bits per client (up + down)"))
    axes[0][0].legend(fontsize=8)
    for ax in axes.flat:                  # minor labels only where no decade tick is in view
        for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() == "log" and lo > 0 and math.floor(math.log10(hi)) \
                    > math.ceil(math.log10(lo)) - 1:
                axis.set_minor_formatter(NullFormatter())
    fig.suptitle(f"{cfg.problem}: {cfg.participation}, {cfg.seeds} seed(s)")
    fig.text(0.5, -0.01, scale_note(cfg, table), ha="center", va="top", fontsize=8,
             color="0.25")
    fig.tight_layout()
    out = figures_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{cfg.tag}.png", out / f"{cfg.tag}.pdf"]
    for p in paths:
        fig.savefig(p, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return paths


def _mark_diverged(ax, bad, x, colors, logy):
    """A diverged replica: dotted up to the round before it diverged, an x there."""
    for (run, seed), grp in bad.groupby(["run", "seed"]):
        at = grp["diverged_at"].iloc[0]
        grp = grp[(grp["round"] < at) & np.isfinite(grp["value"])].sort_values("round")
        if x == "bits":
            grp = grp[grp["bits"] > 0]
        if logy:
            grp = grp[grp["value"] > 0]
        if grp.empty:
            continue
        ax.plot(grp[x], grp["value"], ":", color=colors[run], lw=0.8)
        ax.plot(grp[x].iloc[-1:], grp["value"].iloc[-1:], "x", color=colors[run], ms=8, mew=2,
                label=f"{run} seed {seed}: diverged at round {at:g}")


def scale_note(cfg: Config, table: pd.DataFrame) -> str:
    """The figure's footer: scale and what diverged."""
    note = (f"{'--tiny smoke scale: ' if cfg.tiny else ''}{cfg.problem}, {cfg.n_clients} "
            f"clients, {cfg.participation}, {cfg.seeds} seed(s) from {cfg.seed0}, "
            f"{cfg.rounds} rounds")
    if "diverged_at" in table and table["diverged_at"].notna().any():
        bad = (table[table["diverged_at"].notna()].groupby(["run", "seed"])["diverged_at"]
               .first())
        note += "\nDIVERGED (x; left out of the means): " + ", ".join(
            f"{run} seed {seed} at round {at:g}" for (run, seed), at in bad.items())
    return note


# ------------------------------------------------------------------------------ CLI

def _parser(prog: str = "python -m sims.compare") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run algorithms on one problem and plot loss/accuracy against rounds and "
                    "bits.", epilog=cli.catalogue())
    d = Config()
    p.add_argument("--algorithms", default=d.algorithms,
                   help="comma-separated NAME[:key=value...] (default %(default)s)")
    p.add_argument("--rounds", type=int, default=d.rounds)
    p.add_argument("--seeds", type=int, default=d.seeds, help="number of seeds")
    p.add_argument("--seed0", type=int, default=d.seed0, help="first seed")
    p.add_argument("--bits", default=d.bits, help="x-axis bits: up or total")
    p.add_argument("--out", default=d.out, help="results directory")
    p.add_argument("--figures", default=None,
                   help="figures directory (default figures/compare; --tiny: OUT/figures)")
    p.add_argument("--list", action="store_true", help="list the algorithms and exit")
    cli.add_problem_args(p, d)
    cli.add_run_args(p, checkpoint=d.checkpoint_every, tag=d.tag)
    return p


def main(argv=None, prog: str = "python -m sims.compare") -> int:
    restore_interrupts()
    from ..core import malloc
    malloc.tune_for_command()              # this process is the command's
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        cli.preimport(argv)              # plug-ins first: --help and --list name them
    except cli.CLIError as exc:
        return cli.fail(prog, exc)
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.list:
        for name, desc in list_algorithms().items():
            print(f"{name:16s} {desc}")
        return 0
    cfg = Config(**{k: v for k, v in vars(args).items() if k != "list"})
    cfg.hp, cfg.imports = tuple(args.hp), tuple(args.imports)
    try:
        if cfg.tiny:
            apply_tiny(cfg, explicit_flags(parser, args))
        table, summary = run_all(cfg)
        paths = plot(table, cfg)
    except (CompareError, ValueError) as exc:      # ResultsError, a problem's ValueError
        print(f"{prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:                      # a full disk, an unwritable output
        print(f"{prog}: error: {write_failed_message(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(interrupted_message(exc, "runs"), file=sys.stderr)
        return 130
    for row in summary.itertuples():
        if row.diverged:
            print(f"diverged: {row.algorithm} in {row.diverged} of {cfg.seeds} seed(s) "
                  "(non-finite or blown-up loss or parameters): left out of its final "
                  "metrics, marked x in the figure")
    if not cfg.quiet:
        with pd.option_context("display.width", 160, "display.max_columns", 20):
            print(summary.to_string(index=False))
    print("results:", Path(cfg.out).resolve())
    print("figure:", ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())

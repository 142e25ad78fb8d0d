"""What the FedLADA entries share: the problem (CPU stand-in and paper scale), the seven
methods with the paper's hyperparameters, one engine run with train accuracy and the
consistency term recorded, and the rounds-to-target arithmetic of Tables 1, 7 and 12.

Spec: ``shared/specs/fedlada.md`` (3.1 setup and hyperparameter table, 3.3 tables, 4 claims).

**CPU stand-in** (the default): Fashion-MNIST (Debian's full 60k/10k), 100 clients by
Dirichlet-0.6 in Hsu et al.'s per-client form with balanced sizes (600 images each), 10 a
round (fixed ``m``, without replacement: the theory's sampling), batch 50, 2 local epochs
(24 steps >= the paper's ``K >= 2 / (1 - beta1) = 20``), local learning-rate decay 0.998 per
round, weight decay 1e-3 (SGD methods, FedAdam's local SGD) / 1e-2 (LocalAdam, FedLADA),
coupled L2 (``--wd-mode decoupled``: AdamW style, the other reading of spec 5.5). Model: the 784-50-10 MLP (39,760 parameters): on this 2-core machine one round
of FedLADA costs about 0.1-0.2 s with it (the 784-200-10 MLP about 0.4 s, LeNet about 30x),
so seven methods x 2 seeds x 150 rounds fit the 10-minute budget; a CNN would allow ~10
rounds. **Paper scale** (``--full``): ResNet-18 with GroupNorm on CIFAR-10 (5 local epochs),
CIFAR-100 / TinyImageNet (2 epochs; :data:`PAPER_EPOCHS`) from ``--data-dir``, a random crop
of the image padded by 4 pixels (8 on TinyImageNet's 64x64; no flips: the paper names crops
only), 1500 rounds, the paper's rates.

**Learning rates.** The paper's (spec 3.1): SGD methods ``eta_l = 0.1``, ``eta_g = 1``;
FedAdam ``eta_l = 0.1``, ``eta_g = 0.1``, initial second moment ``1e-2`` and epsilon ``0.01``
(:data:`FEDADAM_EPS`, the author's code); LocalAdam / FedLADA ``eta_l = 1e-3``,
``eta_g = 1``. :data:`CPU_LR` holds the stand-in's rates, from the pilot sweep
``python -m reproduce.fedlada_lr`` (results in ``docs/fedlada_results.md``); ``--paper-lr``
uses the paper's. ``--tuned`` (every entry) adds the tuned protocol beside them
(:func:`reproduce.fedlada_tuning.protocol_runs`: the same runs at ``fedlada_fig2``'s tuned
picks, ledger scope ``tuned``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
import torch

from sims.core import engine
from sims.algorithms.registry import make_algorithm
from sims.core.participation import Participation
from sims.experiments.probes.consistency import TrackConsistency
from sims.store.results import tidy

from . import common, plotting
from .plotting import plt, sns

METHODS = ("fedavg", "fedprox", "scaffold", "fedcm", "fedadam", "localadam", "fedlada")
LABELS = {"fedavg": "FedAvg", "fedprox": "FedProx", "scaffold": "SCAFFOLD", "fedcm": "FedCM",
          "fedadam": "FedAdam", "localadam": "LocalAdam", "fedlada": "FedLADA",
          "fedadam-cm": "FedAdam(*)"}
ADAPTIVE = ("localadam", "fedlada")       # weight decay 1e-2 (spec 3.1); the rest 1e-3

#: Spec 3.1's table (alpha: CIFAR-10's 0.1; the entries pass 0.05 for CIFAR-100/TinyImageNet).
PAPER_HP = {
    "fedavg": {"eta_l": 0.1, "eta": 1.0},
    "fedprox": {"eta_l": 0.1, "eta": 1.0, "mu": 0.1},
    "scaffold": {"eta_l": 0.1, "eta": 1.0},
    "fedcm": {"eta_l": 0.1, "eta": 1.0, "alpha": 0.1},
    "fedadam": {"eta_l": 0.1, "eta": 0.1, "tau": 0.01, "v0": 1e-2},
    "fedadam-cm": {"eta_l": 0.1, "eta": 0.1, "tau": 0.01, "v0": 1e-2, "alpha": 0.1},
    "localadam": {"eta_l": 1e-3, "eta": 1.0},
    "fedlada": {"eta_l": 1e-3, "eta": 1.0, "alpha": 0.1},
}

#: The stand-in's local rates: the pilot sweep's best final test accuracy per method over
#: x0.3 / x1 / x3 / x10 the paper's rate (``reproduce.fedlada_lr``, 1 seed, 40 rounds; numbers
#: in docs/fedlada_results.md). The paper's rates transfer for FedAvg, FedProx, SCAFFOLD,
#: FedAdam and LocalAdam; FedLADA takes 3e-3 (83.2 % vs 81.7 % at 1e-3) and FedCM 1.0 (86.7 %
#: vs 83.7 % at 0.1; the grid's upper edge: FedCM's gradient enters scaled by alpha = 0.1).
#: FedAdam(*) keeps the paper's 0.1 although its pilot prefers 1.0 (82.1 % vs 72.9 %, docs):
#: Figure 5(a) sweeps its alpha at one rate, and at alpha = 1 a rate of 1.0 is FedAdam at 10x.
CPU_LR = {"fedavg": 0.1, "fedprox": 0.1, "scaffold": 0.1, "fedcm": 1.0, "fedadam": 0.1,
          "fedadam-cm": 0.1, "localadam": 1e-3, "fedlada": 3e-3}

LR_DECAY = 0.998

#: FedAdam's server epsilon (``tau``, added to ``sqrt(v)``) and initial second moment: two
#: settings. The paper gives the initial moment only ("initial second-order momenta term as
#: 1e-2 for FedAdam", Sec. 4.1); the epsilon is the first author's FL-Simulator's 0.01 (spec
#: 1.2 [ext]). ``--fedadam-eps`` / ``--fedadam-v0`` change them (``reproduce.fedlada_fedadam``
#: ablates the epsilon). The shared ``FedAdam`` class keeps its own default (``tau = 0.1``,
#: ``v0 = tau^2``) for other papers' entries: the FedLADA entries pass both explicitly.
FEDADAM_EPS, FEDADAM_V0 = 0.01, 1e-2


@dataclass
class StandIn(common.EntryConfig):
    """The flags every FedLADA entry shares (CPU stand-in by default, ``--full`` paper)."""
    seeds: int = 2
    rounds: int = 150
    dataset: str = "fmnist"
    model: str = "mlp"
    hidden: int = 50
    n_clients: int = 100
    participation: float = 0.1
    dirichlet: float = 0.6
    batch_size: int = 50
    local_epochs: int = 2
    local_steps: int = 0             # > 0: this many local steps instead of epochs
    eval_every: int = 5
    eval_train_samples: int = 5000
    test_samples: int = 2000
    paper_lr: bool = False
    tuned: bool = False              # also the tuned protocol (reproduce.fedlada_tuning)
    wd_mode: str = "coupled"         # or "decoupled" (AdamW style; spec 5.5)
    # stand-in search options (docs/fedlada_standin_search.md); defaults keep the stand-in
    lr_decay: float = LR_DECAY       # local-rate decay per round (paper 0.998)
    subset_of: int = 0               # > 0: partition among this many clients, keep n_clients
    depth: int = 1                   # hidden layers of the MLP
    fedadam_eps: float = FEDADAM_EPS  # FedAdam's server epsilon (author's code)
    fedadam_v0: float = FEDADAM_V0    # FedAdam's initial second moment (paper Sec. 4.1)
    resnet_stem: str = "torchvision"  # --full's ResNet-18: "torchvision" (7x7 + max-pool,
    #                                   the author's code, spec 3.1 [ext]) or "cifar" (3x3)
    width: int = 0                   # > 0: the ResNet-18's base width (default 0: 64, the
    #                                  paper's); a narrow ResNet for the stand-in search
    lr_of: str = ""                  # "METHOD=RATE,...": those methods' local rate replaced
    #                                  (stand-in search screens; the protocol says so)

    def run_key(self) -> dict:
        """As :meth:`EntryConfig.run_key`; ``local_steps`` and ``wd_mode`` only when not the
        default (results saved before the options existed stay valid)."""
        key = super().run_key()
        if not self.local_steps:
            key.pop("local_steps", None)
        if self.wd_mode == "coupled":
            key.pop("wd_mode", None)
        if not self.tuned:
            key.pop("tuned", None)
        for name, default in (("lr_decay", LR_DECAY), ("subset_of", 0), ("depth", 1),
                              ("fedadam_eps", FEDADAM_EPS), ("fedadam_v0", FEDADAM_V0)):
            if getattr(self, name) == default:
                key.pop(name, None)
        if self.model != "resnet18":
            key.pop("resnet_stem", None)
        if not self.width:
            key.pop("width", None)
        # --lr-of acts through the runs' hyperparameters, which every run's params carry
        # (fc.hyper): a run it does not touch (X2's FedAvg beside a LocalAdam screen) keeps
        # its key and is reused
        key.pop("lr_of", None)
        return key

    def validate(self):
        if not (self.fedadam_eps >= 0 and self.fedadam_v0 > 0):
            raise common.EntryError(f"--fedadam-eps must be >= 0 and --fedadam-v0 > 0, got "
                                    f"{self.fedadam_eps:g} / {self.fedadam_v0:g}")
        if self.resnet_stem not in ("torchvision", "cifar"):
            raise common.EntryError(f"--resnet-stem is 'torchvision' or 'cifar', got "
                                    f"{self.resnet_stem!r}")
        if not 0 < self.participation <= 1:
            raise common.EntryError(f"--participation is the fraction of clients a round, in "
                                    f"(0, 1], got {self.participation:g}")
        if self.n_clients < 1:
            raise common.EntryError(f"--n-clients must be >= 1, got {self.n_clients}")
        lr_overrides(self.lr_of)
        if self.width < 0 or (self.width and self.model != "resnet18"):
            raise common.EntryError(f"--width is the ResNet-18's base width (> 0, with --model "
                                    f"resnet18), got {self.width} with --model {self.model}")

    def scale(self):
        if self.full:
            self.dataset, self.model, self.rounds, self.seeds = "cifar10", "resnet18", 1500, 1
            self.local_epochs, self.eval_every = 0, 10      # 0: PAPER_EPOCHS[dataset]
            self.eval_train_samples, self.test_samples, self.paper_lr = 10000, 0, True
        if self.tiny:
            self.seeds, self.rounds, self.n_clients, self.hidden = 1, 3, 10, 8
            self.participation, self.local_steps = 0.3, 3
            self.eval_every, self.eval_train_samples, self.test_samples = 1, 300, 200


#: The paper's local epochs per dataset (spec 3.1): 5 on CIFAR-10, 2 on the others.
PAPER_EPOCHS = {"cifar10": 5, "cifar100": 2, "tinyimagenet": 2}

#: The paper's augmentation padding (Sec. 4.1 "random cropping on the extra 4/8-pixel padding
#: images"; spec 3.1 reads 4 for the 32x32 sets, 8 for TinyImageNet's 64x64).
PAPER_PAD = {"tinyimagenet": 8}


def epochs(cfg) -> int:
    """The local epochs: ``--local-epochs``, or with 0 (``--full``'s preset) the paper's for
    the dataset (:data:`PAPER_EPOCHS`; 2 for a dataset the paper does not use)."""
    return int(cfg.local_epochs) or PAPER_EPOCHS.get(cfg.dataset, 2)


def paper_alpha(cfg) -> float:
    """FedLADA's alpha: 0.1 on CIFAR-10 (and the stand-in), 0.05 on CIFAR-100/TinyImageNet."""
    return 0.05 if cfg.dataset in ("cifar100", "tinyimagenet") else 0.1


def methods(cfg) -> list[str]:
    """``--methods``: FedLADA's method names (:data:`PAPER_HP`; one-line error otherwise)."""
    out = common.flag_values(cfg, "methods")
    bad = [m for m in out if m not in PAPER_HP]
    if bad:
        raise common.EntryError(f"--methods: unknown {', '.join(bad)}; choose from "
                                f"{', '.join(METHODS)}")
    return out


def lr_overrides(text: str) -> dict:
    """``--lr-of "METHOD=RATE,..."`` as ``{method: rate}`` (a one-line error for an unknown
    method, a repeated one, or a rate that is not a positive number)."""
    out = {}
    for item in (t.strip() for t in str(text or "").split(",") if t.strip()):
        name, _, value = item.partition("=")
        name = name.strip()
        if name not in PAPER_HP:
            raise common.EntryError(f"--lr-of: unknown method {name!r} in {item!r}; one of "
                                    f"{', '.join(PAPER_HP)}")
        try:
            rate = float(value)
        except ValueError:
            rate = float("nan")
        if not rate > 0 or not math.isfinite(rate) or name in out:
            raise common.EntryError(f"--lr-of: {item!r} is not METHOD=RATE with a positive "
                                    "rate, once per method")
        out[name] = rate
    return out


def hyper(method: str, cfg, **over) -> dict:
    """The method's hyperparameters for this config: the paper's, the stand-in's rates unless
    ``--paper-lr``, a rate ``--lr-of`` replaces, decay 0.998, weight decay per spec 3.1,
    SCAFFOLD's population."""
    hp = dict(PAPER_HP[method])
    if method == "fedlada":
        hp["alpha"] = paper_alpha(cfg)
    if not cfg.paper_lr:
        hp["eta_l"] = CPU_LR[method]
    hp["eta_l"] = lr_overrides(getattr(cfg, "lr_of", "")).get(method, hp["eta_l"])
    hp["weight_decay"] = 1e-2 if method in ADAPTIVE else 1e-3
    if cfg.wd_mode != "coupled":
        hp["wd_mode"] = cfg.wd_mode
    hp["lr_decay"] = getattr(cfg, "lr_decay", LR_DECAY)
    if method == "scaffold":
        hp["n_clients"] = cfg.n_clients
    if method in ("fedadam", "fedadam-cm"):
        hp["tau"] = getattr(cfg, "fedadam_eps", FEDADAM_EPS)
        hp["v0"] = getattr(cfg, "fedadam_v0", FEDADAM_V0)
    hp.update(over)
    return hp


def algorithm(method: str, cfg, **over):
    return make_algorithm(method, **hyper(method, cfg, **over))


def participation(cfg, rate: float | None = None) -> Participation:
    rate = cfg.participation if rate is None else rate
    m = max(1, int(round(rate * cfg.n_clients)))
    return Participation("fixed", m=m)


@lru_cache(maxsize=4)
def _problem(dataset, model, hidden, n_clients, dirichlet, batch_size, local_epochs,
             local_steps, eval_train_samples, test_samples, data_dir, device, subset_of=0,
             depth=1, resnet_stem=0, width=0):
    from sims.problems.image import build_image_problem
    conv = model in ("resnet18", "lenet", "lenet-gn", "cnn")
    kw = {"model_kw": {"hidden": hidden, "depth": depth or 1}} if model in ("mlp", "mlp-ln") else {}
    if subset_of:
        kw["subset_of"] = subset_of
    if conv:
        kw.update(conv=True, eval_grad=False)
        if model == "resnet18":          # the paper's random crop of the padded image
            kw.update(augment="crop", pad=PAPER_PAD.get(dataset, 4),
                      model_kw={"stem": resnet_stem or "cifar", **({"width": width} if width else {})})
    return build_image_problem(
        dataset, model, n_clients, scheme="dirichlet", partition_seed=0,
        partition_kw={"alpha": dirichlet, "variant": "per_client"}, batch_size=batch_size,
        local_epochs=local_epochs, local_steps=local_steps or None,
        eval_train_samples=eval_train_samples or None,
        test_samples=test_samples or None, device=device,
        data=common.cached_dataset(dataset, data_dir), **kw)


def problem(cfg, **over):
    return build_problem(problem_desc(cfg, **over))


def setting_text(cfg) -> str:
    depth = getattr(cfg, "depth", 1)
    model = (f"MLP 784-{'-'.join([str(cfg.hidden)] * max(1, depth))}-10"
             f"{' with LayerNorm' if cfg.model == 'mlp-ln' else ''}" if cfg.model in ("mlp", "mlp-ln") else
             f"MLP 784-{cfg.hidden}-10 with {getattr(cfg, 'activations', '')}"
             if cfg.model == "smooth-mlp" else
             f"resnet18 of width {cfg.width} ({cfg.resnet_stem} stem)"
             if cfg.model == "resnet18" and getattr(cfg, "width", 0) else
             "LeNet with GroupNorm" if cfg.model == "lenet-gn" else cfg.model)
    return (f"{cfg.dataset} ({'paper dataset' if cfg.dataset in PAPER_EPOCHS else 'stand-in'}), "
            f"{model}, {cfg.n_clients} clients Dir-{cfg.dirichlet:g}, "
            f"{cfg.participation:.0%} a round, batch {cfg.batch_size}, "
            f"{f'{cfg.local_steps} local steps' if cfg.local_steps else f'{epochs(cfg)} local epochs'}"
            f"{f', clients of a {cfg.subset_of}-client partition' if getattr(cfg, 'subset_of', 0) else ''}"
            f"{f', decay {cfg.lr_decay:g}' if getattr(cfg, 'lr_decay', LR_DECAY) != LR_DECAY else ''}"
            f", {cfg.seeds} seed(s)")


# ------------------------------------------------------------------------------ running
class TrainAccuracy:
    """Engine observer: training accuracy of the server model on the problem's evaluation
    subset of the training set (Table 1's "TRAIN" accuracy), every ``every`` rounds."""
    at_start = True

    def __init__(self, every: int):
        self.every = max(1, int(every))

    def __call__(self, view) -> dict:
        p = view.problem
        idx = p.eval_index
        # standard strides: the one-channel data sets keep an arbitrary stride on their size-1
        # channel axis, which reads as channels_last, and GroupNorm under the vmapped
        # evaluation refuses that layout (torch: "NYI: querying is_contiguous inside of vmap")
        x = p.x[idx].clone(memory_format=torch.contiguous_format)
        acc, _ = p._accuracy(view.server["theta"], x, p.y[idx])
        return {"train_acc": acc}


def engine_run(name: str, params: dict, build, rounds: int, eval_every: int,
               observers=()) -> common.Run:
    """A :class:`common.Run` that runs ``build() -> (problem, algorithm, participation)``
    through the engine with train accuracy and the consistency term recorded (and any
    further ``observers``); the table carries a ``diverged_at`` column (the round the
    replica's model stopped being finite)."""
    def execute(cfg, seeds, progress):
        prob, alg, part = build()
        out = engine.run(prob, TrackConsistency(alg), part, rounds, seeds,
                         eval_every=eval_every,
                         observers=[TrainAccuracy(eval_every), *observers],
                         max_batch=cfg.max_batch or None, progress=lambda t: progress(1))
        progress(rounds - len(out.participants[0]))
        df = tidy(out, name, params)
        div = dict(zip(out.seeds, out.diverged_at))
        df["diverged_at"] = df["seed"].map(lambda s: div[s]).astype("float")
        return df, {"algorithm": alg.describe(), "participation": part.describe(),
                    "problem": common.describe_problem(prob),
                    "diverged_at_round": out.diverged_at}
    return common.Run(name, params, rounds=rounds, eval_every=eval_every, execute=execute)


# ------------------------------------------------------------------------------ targets
def first_reach(df: pd.DataFrame, metric: str, target: float) -> pd.Series:
    """Per (run, seed): the first evaluated round whose ``metric`` >= ``target`` (inf if
    never): Tables 1 and 7's "minimum rounds to reach the target"."""
    sub = df[df.metric == metric]
    out = {}
    for (run, seed), grp in sub.groupby(["run", "seed"]):
        hit = grp[grp.value >= target]
        out[(run, seed)] = float(hit["round"].min()) if len(hit) else math.inf
    return pd.Series(out, dtype=float)


def rounds_summary(df: pd.DataFrame, metric: str, target: float) -> pd.DataFrame:
    """Per run: mean rounds to ``target`` over seeds (inf if any seed never reaches it, as
    Table 7's mean over 5 seeds), the seed min and max, and the paper's multiplier
    (rounds / best, truncated to 2 decimals as Table 1 prints them)."""
    per = first_reach(df, metric, target)
    rows = []
    for run, vals in per.groupby(level=0):
        v = vals.to_numpy()
        rows.append({"run": run, "rounds": float(v.mean()), "lo": float(v.min()),
                     "hi": float(v.max())})
    out = pd.DataFrame(rows).set_index("run")
    best = out["rounds"][np.isfinite(out["rounds"])].min() if np.isfinite(out["rounds"]).any() \
        else math.nan
    out["multiplier"] = [math.floor(100 * r / best) / 100 if np.isfinite(r) and best > 0
                         else math.inf for r in out["rounds"]]
    return out


def fmt_rounds(row) -> str:
    if not np.isfinite(row["rounds"]):
        return "inf"
    spread = f" [{row['lo']:.0f}-{row['hi']:.0f}]" if row["hi"] > row["lo"] else ""
    return f"{row['rounds']:.0f}{spread} ({row['multiplier']:.2f}x)"


def final_by_seed(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per run: the last evaluated value of ``metric``, mean / min / max over seeds."""
    sub = df[df.metric == metric]
    last = sub[sub["round"] == sub.groupby(["run", "seed"])["round"].transform("max")]
    return last.groupby("run")["value"].agg(["mean", "min", "max"])


def best_by_seed(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per run: the best value of ``metric`` over the evaluated rounds (Table 6's "Acc."),
    mean / min / max over seeds."""
    sub = df[df.metric == metric]
    return sub.groupby(["run", "seed"])["value"].max().groupby("run").agg(["mean", "min", "max"])


def pm(row, scale=100.0, digits=1) -> str:
    """``mean [min-max]`` of a row of :func:`final_by_seed`, in percent by default."""
    return (f"{scale * row['mean']:.{digits}f} [{scale * row['min']:.{digits}f}-"
            f"{scale * row['max']:.{digits}f}]")


def zoom_accuracy(ax, df, metric: str) -> None:
    """Accuracy panels: the y range of the values after the first tenth of the run."""
    late = df[(df.metric == metric) & (df["round"] >= df["round"].max() / 10)]
    if len(late):
        ax.set_ylim(max(0.0, late["value"].min() - 0.02), min(1.0, late["value"].max() + 0.01))


def label(run: str) -> str:
    return LABELS.get(run, run)


# ------------------------------------------------------------------------------ sweeps
PROBLEM_KEYS = ("dataset", "model", "hidden", "n_clients", "dirichlet", "batch_size",
                "local_epochs", "local_steps", "eval_train_samples", "test_samples", "data_dir", "device",
                "subset_of", "depth", "resnet_stem", "width")


def problem_desc(cfg, **over) -> dict:
    """The problem as the JSON description the sweep API keys its cells by (``local_steps``
    only when set, as in :meth:`StandIn.run_key`)."""
    desc = {**{k: getattr(cfg, k, 0) for k in PROBLEM_KEYS}, **over}
    if not desc["local_epochs"]:
        desc["local_epochs"] = PAPER_EPOCHS.get(desc["dataset"], 2)
    for key in ("local_steps", "subset_of"):
        if not desc[key]:
            desc.pop(key)
    if desc["depth"] in (0, 1):
        desc.pop("depth")
    if desc["model"] != "resnet18":
        desc.pop("resnet_stem")
    if not desc["width"]:
        desc.pop("width")
    return desc


def build_problem(desc: dict):
    """The sweep API's ``build_problem``: the problem of :func:`problem_desc`."""
    return _problem(*(desc.get(k, 0) for k in PROBLEM_KEYS))


def participation_text(cfg, rate: float | None = None) -> str:
    return f"m={participation(cfg, rate).m}"


def plot_varied(df, cfg, column: str, label, varied: str, title: str, stem: str):
    """Test accuracy and training loss against rounds, one band per value of ``column`` (the
    setting an entry varies: K, participation), healthy replicas only; ``varied`` replaces
    that setting's phrase in the stand-in's description."""
    df = common.healthy(df)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    n = df["run"].nunique()
    for ax, metric, ylabel, logy in ((axes[0], "test_acc", "test accuracy", False),
                                     (axes[1], "train_loss", "training loss", True)):
        plotting.band_plot(ax, df, metric, column, logy=logy, label=label,
                           palette=sns.color_palette("viridis", n))
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        if not logy:
            zoom_accuracy(ax, df, metric)
    fig.suptitle(f"{title}: {varied(setting_text(cfg))}", fontsize=9, y=1.02)
    return plotting.save(fig, cfg.figures, stem)


# ------------------------------------------------------------------------------ verdicts
#: The paper's regime (spec 3.1, CIFAR-10 column; Sec. 4.1): 500 samples a client at batch 50
#: and 5 local epochs = 50 local steps a round, 10 of 100 clients a round, 1500 rounds with the
#: local rate decayed 0.998 a round (0.998^1500 = 0.050 of its start), Table 7's 5 seeds, and
#: the fitting regime of Table 1 (every method reaches 98 % train accuracy).
PAPER_STEPS, PAPER_M, PAPER_ROUNDS, PAPER_SEEDS, TRAIN_TARGET = 50, 10, 1500, 5, 0.98
PAPER_DECAY_REACHED = LR_DECAY ** PAPER_ROUNDS
SOURCE = "FedLADA Sec. 4.1, spec 3.1"
#: Margin of "above" for accuracies (a difference below half a point is not "above").
MARGIN = 0.005
#: The claims' tuning protocol: the stand-in's rates from the one-seed 40-round pilot
#: (``reproduce.fedlada_lr``), the paper's for the rest (``--paper-lr``: the paper's all).
PROTOCOL_PILOT = ("local rates from the reproduce.fedlada_lr pilot, the paper's Sec. 4.1 "
                  "settings otherwise")
PROTOCOL_PAPER = "paper: Sec. 4.1 fixed per-family rates"


def protocol(cfg):
    from .protocols import Protocol
    if getattr(cfg, "lr_of", ""):           # a screen: neither protocol's rates
        return Protocol("pilot", f"{PROTOCOL_PAPER if cfg.paper_lr else PROTOCOL_PILOT}, "
                        f"except the local rates --lr-of {cfg.lr_of} (a stand-in screen)",
                        source="docs/fedlada_standin_search.md")
    if cfg.paper_lr:
        return Protocol("paper", PROTOCOL_PAPER, source=SOURCE)
    return Protocol("pilot", PROTOCOL_PILOT, seeds=1, horizon=40, plotted=cfg.rounds,
                    source="reproduce.fedlada_lr")


def steps_per_round(cfg) -> int:
    if cfg.local_steps:
        return int(cfg.local_steps)
    prob = problem(cfg)
    return int(getattr(prob, "local_steps", 0) or 0) or int(
        math.ceil(np.mean([len(p) for p in prob.parts]) / cfg.batch_size) * epochs(cfg))


#: The premise of Fig. 1 and claims E1-E4, E7, E13: "LocalAdam generalises worse" needs a test
#: accuracy below FedAvg's by at least this much and by at least the seed spread.
PREMISE_TIE = 0.005
#: The stand-in search's record (docs/fedlada_standin_search.md): the premise measured on each
#: candidate, read where an entry's run does not hold both LocalAdam and FedAvg.
SEARCH_SUMMARY = (__import__("pathlib").Path(__file__).resolve().parent.parent / "docs"
                  / "fedlada_standin_search" / "summary.csv")


@dataclass(frozen=True)
class Premise:
    """The premise measured on one run (:func:`localadam_premise`): ``fits`` (LocalAdam has
    the lowest training loss averaged over the evaluated rounds after 0 *and* the lowest
    averaged over the last 10 % of the rounds, among the methods run), ``test`` (LocalAdam's
    test accuracy over the last 10 % of the rounds against FedAvg's: ``below`` / ``above`` by
    at least the larger of the seed spread and :data:`PREMISE_TIE`, else ``tie``), and the
    numbers behind them."""
    fits: bool
    test: str
    area: dict
    tail_loss: dict
    gap: float          # FedAvg's tail test accuracy - LocalAdam's (mean over seeds)
    spread: float       # the bar ``gap`` is held to

    @property
    def holds(self) -> bool:
        return self.fits and self.test == "below"

    def text(self) -> str:
        area = ", ".join(f"{label(m)} {v:.4f}" for m, v in self.area.items())
        return (f"premise (LocalAdam fits fastest and ends below FedAvg in test accuracy): "
                f"training loss averaged over rounds {area}; LocalAdam fits fastest: "
                f"{'yes' if self.fits else 'no'}; test accuracy FedAvg - LocalAdam "
                f"{100 * self.gap:+.2f} pp (bar {100 * self.spread:.2f}): {self.test} -> "
                f"{'holds' if self.holds else 'absent'}")


def _tail(g: pd.DataFrame, metric: str) -> pd.Series:
    """Per seed: ``metric`` averaged over the evaluations in the last 10 % of the rounds."""
    sub = g[g.metric == metric]
    T = sub["round"].max()
    return sub[sub["round"] > 0.9 * T].groupby("seed")["value"].mean()


def localadam_premise(df: pd.DataFrame) -> Premise | None:
    """The premise of Fig. 1 (LocalAdam fits fastest and then generalises worse than FedAvg)
    measured on a tidy results table, or ``None`` where the run lacks LocalAdam or FedAvg.
    One definition: the entries' regime cards and the stand-in search
    (``docs/fedlada_standin_search/summarize.py``) both call it."""
    runs = set(df["run"].unique())
    if not {"localadam", "fedavg"} <= runs:
        return None
    area, tail = {}, {}
    for run, g in df.groupby("run", sort=False):
        loss = g[(g.metric == "train_loss") & (g["round"] > 0)]
        area[run] = float(loss.groupby("seed")["value"].mean().mean())
        tail[run] = float(_tail(g, "train_loss").mean())
    fits = (min(area, key=area.get) == "localadam" and min(tail, key=tail.get) == "localadam")
    la = _tail(df[df.run == "localadam"], "test_acc")
    fa = _tail(df[df.run == "fedavg"], "test_acc")
    gap = float(fa.mean() - la.mean())
    spread = max(float(la.max() - la.min()), float(fa.max() - fa.min()), PREMISE_TIE)
    test = "below" if gap >= spread else "above" if -gap >= spread else "tie"
    return Premise(bool(fits), test, area, tail, gap, spread)


def search_premise(path=None) -> tuple[int, int] | None:
    """From the stand-in search's record: (candidates, candidates where the premise held), or
    ``None`` when the record is missing."""
    path = SEARCH_SUMMARY if path is None else path
    try:
        s = pd.read_csv(path)
    except (OSError, ValueError):
        return None
    per = s.groupby("candidate")["premise"].first()
    return int(len(per)), int(per.astype(bool).sum())


def premise_items(df, checked: bool = True) -> list:
    """The premise as regime-card items: measured on the run where it holds LocalAdam and
    FedAvg (two items: fits fastest, ends below FedAvg), else one item from the stand-in
    search (holds only if some candidate of the search had it). ``checked``: the claim needs
    the premise (a failing item makes it ``premise absent``); otherwise the items are shown
    for information (claims that measure the premise itself, Fig. 1's, or do not need it)."""
    from . import regime as rg

    def item(name, holds, source):
        return (rg.premise(name, holds, source) if checked else
                rg.value(name, bool(holds), True, rg.info(), source))
    p = localadam_premise(df) if df is not None else None
    if p is not None:
        return [item("LocalAdam fits fastest", p.fits,
                     "Fig. 1, Sec. 1: lowest training loss, averaged over rounds and at the end"),
                item("LocalAdam ends below FedAvg (test)", p.test == "below",
                     f"Fig. 1, Sec. 1: gap {100 * p.gap:+.2f} pp, bar {100 * p.spread:.2f} pp")]
    found = search_premise()
    n, k = found if found is not None else (0, 0)
    return [item("premise in the stand-in search", k > 0,
                 f"docs/fedlada_standin_search.md: {k} of {n} candidates"
                 if found is not None else "stand-in search record missing")]


def card(cfg, df=None, *, end: bool = True, fit: bool = False, premise: bool = False,
         rounds: int | None = None, steps: bool = True, clients: bool = True):
    """The FedLADA regime card: local steps a round, clients a round and seeds always;
    ``end`` (claims about the trained state) the learning-rate decay reached by the horizon
    against the paper's 0.998^1500; ``fit`` (claims on the 98 % train target) the train
    accuracy of the best-fitting method; ``premise`` (claims that presuppose local Adam's
    over-fitting: E1-E4, E7, E13) the checked :func:`premise_items`, every other card the same
    items for information (every FedLADA card shows the premise)."""
    from . import regime as rg
    items = [rg.local_steps(steps_per_round(cfg), PAPER_STEPS,
                            source=f"{SOURCE}: 500 samples, batch 50, 5 epochs (CIFAR-10)")
             if steps else None,
             rg.clients_per_round(participation(cfg).m, PAPER_M, source=f"{SOURCE}: 10 %")
             if clients else None,
             rg.seeds(cfg.seeds, PAPER_SEEDS, "Table 7: mean of 5 seeds")]
    if end:
        reached = getattr(cfg, "lr_decay", LR_DECAY) ** (rounds or cfg.rounds)
        items.append(rg.value("lr decay reached", float(reached), PAPER_DECAY_REACHED,
                              rg.factor(2), f"{SOURCE}: 0.998 a round, 1500 rounds"))
    if fit and df is not None:
        tr = final_by_seed(df, "train_acc") if (df.metric == "train_acc").any() else None
        best = float(tr["mean"].max()) if tr is not None and len(tr) else math.nan
        items.append(rg.train_acc_reached(best, TRAIN_TARGET, "Table 1: 98 % train accuracy"))
    items += premise_items(df, checked=bool(premise))
    return rg.RegimeCard(items)


def seeds_of(df, run: str, metric: str, how: str = "final"):
    """Per-seed values of ``run`` (:func:`reproduce.verdicts.per_seed`)."""
    from .verdicts import per_seed
    return per_seed(df, metric, how, run=run)

"""Client partitioners: which training samples each simulated client holds.

Every partitioner is a pure function of its arguments and ``seed`` (a fresh
``numpy.random.default_rng(seed)``; no global RNG state is read or changed),
and returns ``list[np.ndarray]``: one int64 array of sample indices per
client, sorted ascending.  Unless stated otherwise every sample goes to
exactly one client.  Seed the partition separately from sampling and training
(anchors.md, "Determinism and seeding").

Schemes
-------
* :func:`iid` -- uniform random split into equal sizes (sizes differ by at
  most one; the first ``n_samples % n_clients`` clients get one extra).
* :func:`label_shards` -- the pathological non-iid split of McMahan et al.
  (2017), used by Fed-EF §4.2: sort by label, cut into ``n_clients *
  shards_per_client`` shards, give every client ``shards_per_client`` shards
  uniformly at random.  ``exact_classes=True`` makes every shard single-class
  (Fed-EF §6 item 15).
* :func:`dirichlet` -- label-distribution skew with concentration ``alpha``:
  ``variant="per_class"`` (Yurochkin et al. 2019; FedLab ``hetero_dir_partition``,
  Flower ``DirichletPartitioner``) or ``variant="per_client"`` (Hsu et al. 2019
  style, as FedDyn / FedLab ``client_inner_dirichlet_partition``).
* :func:`partition` -- dispatch by scheme name with parameter validation.
* :func:`subset_of_clients` -- pick ``n`` clients of an existing partition
  (Fed-EF Figure 8, ``fig8_partition = subset_of_200``).
"""

from __future__ import annotations

import bisect
import inspect
import numbers
from typing import Any, Sequence

import numpy as np

from .errors import PartitionError

__all__ = [
    "iid",
    "label_shards",
    "make_shards",
    "dirichlet",
    "partition",
    "subset_of_clients",
    "validate_partition",
    "class_counts",
    "SCHEMES",
    "parse_scheme",
]

Parts = list[np.ndarray]


# ----------------------------------------------------------------------------- validation

def _int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PartitionError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise PartitionError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _rng(seed: Any) -> np.random.Generator:
    return np.random.default_rng(_int(seed, "seed", 0))


def _labels(labels: Any) -> np.ndarray:
    try:
        y = np.asarray(labels)
    except Exception as exc:  # e.g. a CUDA tensor
        raise PartitionError(f"labels must be array-like ({type(exc).__name__}: {exc})") from None
    if y.ndim != 1:
        raise PartitionError(f"labels must be 1-d, got shape {y.shape}")
    if len(y) == 0:
        raise PartitionError("labels is empty")
    if y.dtype.kind not in "iu":
        raise PartitionError(f"labels must be integers, got dtype {y.dtype}")
    if y.min() < 0:
        raise PartitionError(f"labels must be >= 0, got {int(y.min())}")
    return y.astype(np.int64, copy=False)


def _n_clients(n_clients: Any, n_samples: int) -> int:
    n = _int(n_clients, "n_clients", 1)
    if n > n_samples:
        raise PartitionError(f"n_clients={n} exceeds the number of samples ({n_samples})")
    return n


def validate_partition(parts: Sequence[np.ndarray], n_samples: int, *, complete: bool = True,
                       allow_empty: bool = False) -> None:
    """Raise :class:`PartitionError` on out-of-range or duplicate indices, empty
    clients (unless ``allow_empty``) or, with ``complete``, unused samples."""
    counts = np.zeros(n_samples, dtype=np.int64)
    for i, p in enumerate(parts):
        p = np.asarray(p)
        if p.ndim != 1 or (len(p) and p.dtype.kind not in "iu"):
            raise PartitionError(f"client {i}: indices must be a 1-d integer array")
        if not allow_empty and len(p) == 0:
            raise PartitionError(f"client {i} has no samples")
        if len(p) and (p.min() < 0 or p.max() >= n_samples):
            raise PartitionError(f"client {i}: index out of range 0..{n_samples - 1}")
        np.add.at(counts, p, 1)
    if (counts > 1).any():
        raise PartitionError(f"{int((counts > 1).sum())} samples are assigned to more than one client "
                             f"(e.g. sample {int(np.argmax(counts > 1))})")
    if complete and (counts == 0).any():
        raise PartitionError(f"{int((counts == 0).sum())} samples are assigned to no client")


def class_counts(parts: Sequence[np.ndarray], labels: Any, num_classes: int | None = None) -> np.ndarray:
    """``[n_clients, num_classes]`` matrix of per-client label counts."""
    y = _labels(labels)
    c = int(y.max()) + 1 if num_classes is None else num_classes
    return np.stack([np.bincount(y[p], minlength=c) for p in parts]) if parts else np.zeros((0, c), np.int64)


def _finish(parts: list[np.ndarray], n_samples: int) -> Parts:
    out = [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    validate_partition(out, n_samples, allow_empty=True)
    return out


# ----------------------------------------------------------------------------- iid

def iid(n_samples: int, n_clients: int, seed: int) -> Parts:
    """Uniformly random equal-size split of ``range(n_samples)``.

    Sizes differ by at most one; the first ``n_samples % n_clients`` clients
    hold one extra sample.
    """
    n = _int(n_samples, "n_samples", 1)
    k = _n_clients(n_clients, n)
    perm = _rng(seed).permutation(n)
    return _finish(np.array_split(perm, k), n)


# ----------------------------------------------------------------------------- shards

def _dhondt(sizes: np.ndarray, n_shards: int) -> np.ndarray:
    """Shards per class: one each, then repeatedly one more to the class whose
    shards are currently largest (D'Hondt).  Keeps shard sizes as equal as
    possible; balanced classes get exactly ``n_shards / n_classes`` each."""
    k = np.ones(len(sizes), dtype=np.int64)
    for _ in range(n_shards - len(sizes)):
        k[np.argmax(sizes / k)] += 1  # argmax: ties go to the lowest class
    return k


def make_shards(labels: Any, n_shards: int, *, exact_classes: bool = False) -> Parts:
    """The label-sorted shards of :func:`label_shards`, in label order.

    ``exact_classes=False`` (McMahan et al. 2017; Fed-EF §4.2): stable sort by
    label and cut into ``n_shards`` contiguous shards of equal size (sizes
    differ by at most one when ``n_shards`` does not divide the sample count,
    so no sample is dropped).  When class sizes are not multiples of the shard
    size (MNIST: 5421..6742 per class vs 150 per shard) a few shards straddle
    two classes.

    ``exact_classes=True`` (Fed-EF §6 item 15): every shard holds one class.
    Each class gets its share of the shards by D'Hondt apportionment (one per
    class, then each further shard to the class with the currently largest
    shards) and is cut into that many near-equal shards; sizes are therefore
    slightly unequal across classes (MNIST, 400 shards: 148..152 rather than
    150) and MNIST classes get 36..45 shards each (the plain cut gives 9
    mixed shards).  For balanced classes
    (FMNIST 6000, CIFAR-10 5000 per class) both modes give identical shards.
    """
    y = _labels(labels)
    n = _int(n_shards, "n_shards", 1)
    if n > len(y):
        raise PartitionError(f"{n} shards requested but there are only {len(y)} samples")
    order = np.argsort(y, kind="stable")
    if not exact_classes:
        return list(np.array_split(order, n))
    classes, starts, sizes = np.unique(y[order], return_index=True, return_counts=True)
    if n < len(classes):
        raise PartitionError(f"exact_classes needs at least one shard per class: {n} shards < {len(classes)} classes")
    shards: Parts = []
    for start, size, k in zip(starts, sizes, _dhondt(sizes, n)):
        shards += np.array_split(order[start:start + size], k)
    return shards


def label_shards(labels: Any, n_clients: int, shards_per_client: int = 2, *, seed: int,
                 exact_classes: bool = False) -> Parts:
    """Fed-EF's non-iid split (§4.2, after McMahan et al. 2017).

    Sort by label (stable), cut into ``n_clients * shards_per_client`` shards
    (see :func:`make_shards`), and give each client ``shards_per_client``
    shards drawn uniformly at random without replacement.  With 2 single-class
    shards a client holds at most 2 classes (possibly 1, when both shards are
    of the same class).  Fed-EF: n=200, 400 shards of 150 (MNIST/FMNIST) or
    125 (CIFAR) samples.
    """
    y = _labels(labels)
    k = _n_clients(n_clients, len(y))
    s = _int(shards_per_client, "shards_per_client", 1)
    if k * s > len(y):
        raise PartitionError(f"n_clients * shards_per_client = {k * s} shards exceed the {len(y)} samples")
    shards = make_shards(y, k * s, exact_classes=exact_classes)
    owner = _rng(seed).permutation(k * s).reshape(k, s)
    return _finish([np.concatenate([shards[j] for j in row]) for row in owner], len(y))


# ----------------------------------------------------------------------------- dirichlet

def _per_class_counts(class_sizes: np.ndarray, n_clients: int, alpha: float, rng: np.random.Generator,
                      self_balancing: bool) -> np.ndarray:
    """One draw of the per-class Dirichlet allocation as a [n_clients, n_classes] count matrix."""
    counts = np.zeros((n_clients, len(class_sizes)), dtype=np.int64)
    totals = np.zeros(n_clients, dtype=np.int64)
    mean = class_sizes.sum() / n_clients
    for c, size in enumerate(class_sizes):
        p = rng.dirichlet(np.full(n_clients, alpha))
        if self_balancing:  # FedLab / NIID-Bench trick: clients above the mean size get nothing more
            p = p * (totals < mean)
        if not np.isfinite(p).all() or p.sum() <= 0:  # underflow at tiny alpha
            p = (totals < mean) if self_balancing else np.ones(n_clients)
        cuts = (np.cumsum(p / p.sum()) * size).astype(np.int64)
        cuts[-1] = size
        counts[:, c] = np.diff(cuts, prepend=0)
        totals += counts[:, c]
    return counts


def _per_client_assign(pools: list[np.ndarray], sizes: np.ndarray, alpha: float,
                       rng: np.random.Generator) -> list[list[int]]:
    """Per-client priors q_i ~ Dir(alpha 1_C); fill client slots in random order,
    drawing each slot's class from q_i restricted to not-yet-exhausted classes."""
    n_classes, n_clients = len(pools), len(sizes)
    priors = rng.dirichlet(np.full(n_classes, alpha), size=n_clients)
    slots = rng.permutation(np.repeat(np.arange(n_clients), sizes))
    u = rng.random(len(slots))
    remaining = [len(p) for p in pools]
    taken = [0] * n_classes
    version = 0  # bumped whenever a class runs out
    cache: dict[int, tuple[int, list[float]]] = {}
    out: list[list[int]] = [[] for _ in range(n_clients)]
    for client, x in zip(slots.tolist(), u.tolist()):
        hit = cache.get(client)
        if hit is None or hit[0] != version:
            w = [q if r > 0 else 0.0 for q, r in zip(priors[client].tolist(), remaining)]
            if sum(w) <= 0.0:  # prior has (numerically) no mass left: fall back to remaining class sizes
                w = [float(r) for r in remaining]
            cum = np.cumsum(w).tolist()
            hit = cache[client] = (version, cum)
        cum = hit[1]
        c = bisect.bisect_right(cum, x * cum[-1])
        if c >= n_classes or remaining[c] == 0:  # x * total rounded up to total
            c = max(i for i in range(n_classes) if remaining[i] > 0 and (cum[i] > (cum[i - 1] if i else 0.0)))
        out[client].append(int(pools[c][taken[c]]))
        taken[c] += 1
        remaining[c] -= 1
        if remaining[c] == 0:
            version += 1
    return out


def dirichlet(labels: Any, n_clients: int, alpha: float, seed: int, variant: str = "per_class", *,
              min_size: int = 1, max_retries: int = 1000, self_balancing: bool = False) -> Parts:
    """Label-skew partition with Dirichlet concentration ``alpha`` (smaller = more skew).

    ``variant="per_class"`` (Yurochkin et al. 2019; FedLab ``hetero_dir_partition``,
    Flower ``DirichletPartitioner``): for each class draw proportions over the
    clients ``p ~ Dir(alpha * 1_n)`` and cut the class's shuffled samples at
    ``floor(cumsum(p) * class_size)``.  Client sizes vary.  If some client gets
    fewer than ``min_size`` samples the whole draw is repeated (up to
    ``max_retries`` draws, then :class:`PartitionError`).  ``self_balancing=True``
    adds FedLab's / NIID-Bench's trick (Flower's default): a client already
    holding more than the mean size gets no share of later classes; this
    balances sizes but makes the split sparser than ``alpha`` suggests.  Off by
    default.

    ``variant="per_client"`` (Hsu et al. 2019 style; FedDyn / FedLab
    ``client_inner_dirichlet_partition``): client sizes are equal (as in
    :func:`iid`); each client draws a label distribution ``q_i ~ Dir(alpha * 1_C)``
    over the C classes; client slots are filled in a random order, each taking
    one not-yet-used sample of a class drawn from ``q_i`` restricted to the
    classes that still have samples (when ``q_i`` has no mass left there, the
    remaining class sizes are used instead; FedDyn's loop hangs and Flower's
    gives NaN in that case).  No retries are needed; ``min_size`` only has to
    be <= the equal size.  Note Hsu et al. write ``q ~ Dir(alpha' p)`` with a
    prior ``p`` (uniform for balanced data), so their ``alpha'`` equals
    ``C * alpha`` here.
    """
    y = _labels(labels)
    n = len(y)
    k = _n_clients(n_clients, n)
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not np.isfinite(alpha) or alpha <= 0:
        raise PartitionError(f"alpha must be a finite number > 0, got {alpha!r}")
    alpha = float(alpha)
    if variant not in ("per_class", "per_client"):
        raise PartitionError(f"unknown dirichlet variant {variant!r}; use 'per_class' or 'per_client'")
    m = _int(min_size, "min_size", 0)
    tries = _int(max_retries, "max_retries", 1)
    if m * k > n:
        raise PartitionError(f"min_size={m} for {k} clients needs {m * k} samples, only {n} available")
    rng = _rng(seed)
    classes, y_idx = np.unique(y, return_inverse=True)
    pools = [rng.permutation(np.flatnonzero(y_idx == c)) for c in range(len(classes))]

    if variant == "per_client":
        if self_balancing:
            raise PartitionError("self_balancing applies to variant='per_class' only")
        sizes = np.full(k, n // k, dtype=np.int64)
        sizes[: n % k] += 1
        return _finish([np.array(p, dtype=np.int64) for p in _per_client_assign(pools, sizes, alpha, rng)], n)

    class_sizes = np.array([len(p) for p in pools])
    for _ in range(tries):
        counts = _per_class_counts(class_sizes, k, alpha, rng, self_balancing)
        if counts.sum(axis=1).min() >= m:
            break
    else:
        raise PartitionError(
            f"dirichlet(per_class, alpha={alpha:g}, n_clients={k}): no draw in {tries} gave every client "
            f">= {m} samples; raise alpha or max_retries, lower min_size or n_clients, or use self_balancing=True"
        )
    parts: list[list[np.ndarray]] = [[] for _ in range(k)]
    for c, pool in enumerate(pools):
        for i, chunk in enumerate(np.split(pool, np.cumsum(counts[:, c])[:-1])):
            parts[i].append(chunk)
    return _finish([np.concatenate(p) for p in parts], n)


# ----------------------------------------------------------------------------- dispatch

SCHEMES = {"iid": iid, "shards": label_shards, "label_shards": label_shards, "dirichlet": dirichlet}


def partition(labels: Any, n_clients: int, scheme: str, seed: int, **kw: Any) -> Parts:
    """Partition by scheme name: ``"iid"``, ``"shards"`` (= ``"label_shards"``) or ``"dirichlet"``.

    Extra keywords go to the scheme's function (``shards_per_client``,
    ``exact_classes``; ``alpha`` (required), ``variant``, ``min_size``,
    ``max_retries``, ``self_balancing``); unknown ones are an error.
    """
    if scheme not in SCHEMES:
        raise PartitionError(f"unknown partition scheme {scheme!r}; known: iid, shards (label_shards), dirichlet")
    fn = SCHEMES[scheme]
    params = inspect.signature(fn).parameters
    fixed = {"labels", "n_samples", "n_clients", "seed"}
    accepted = [p for p in params if p not in fixed]
    unknown = sorted(set(kw) - set(accepted))
    if unknown:
        raise PartitionError(f"scheme {scheme!r} got unknown option(s) {', '.join(unknown)}; "
                             f"accepted: {', '.join(accepted) or 'none'}")
    missing = [p for p in accepted if params[p].default is inspect.Parameter.empty and p not in kw]
    if missing:
        raise PartitionError(f"scheme {scheme!r} needs {', '.join(missing)} (e.g. {missing[0]}=0.5)")
    y = _labels(labels)
    if fn is iid:
        return iid(len(y), n_clients, seed)
    return fn(y, n_clients, seed=seed, **kw)


def subset_of_clients(parts: Sequence[np.ndarray], n: int, seed: int, *, return_ids: bool = False):
    """``n`` clients of an existing partition, chosen uniformly without replacement.

    Fed-EF Fig. 8 (``fig8_partition = subset_of_200``): keep the n=200
    partition (300 samples per client) and train on ``n`` of its clients.
    Returns the chosen clients' index arrays in ascending client order, and
    with ``return_ids`` also the chosen client ids.
    """
    total = len(parts)
    if total == 0:
        raise PartitionError("subset_of_clients: the partition has no clients")
    m = _int(n, "n", 1)
    if m > total:
        raise PartitionError(f"subset_of_clients: n={m} exceeds the partition's {total} clients")
    ids = np.sort(_rng(seed).choice(total, size=m, replace=False))
    chosen = [parts[i] for i in ids]
    return (chosen, ids) if return_ids else chosen


def option_value(text: str):
    """``"0.1"`` -> 0.1, ``"3"`` -> 3, ``"true"`` -> True, ``"none"`` -> None, else the text
    (stripped): a ``KEY=VALUE`` option's value, here and on the command line (:mod:`sims.cli`)."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text.strip()


def parse_scheme(text: str, flag: str = "partition") -> tuple[str, dict]:
    """A scheme with its options as text -> ``(scheme, keywords of partition)``:
    ``"shards"``, ``"iid"``, ``"dirichlet:alpha=0.5[,variant=per_client,min_size=2]"``
    (``:`` or ``,`` between options), checked against the scheme's parameters (a missing
    ``alpha`` or an unknown option is a one-line :class:`PartitionError`; ``flag`` names the
    setting in it)."""
    scheme, _, rest = str(text).strip().partition(":")
    scheme = scheme.strip().lower()
    kw: dict[str, Any] = {}
    for item in rest.replace(":", ",").split(","):
        if not item.strip():
            continue
        key, sep, val = item.partition("=")
        if not sep or not key.strip():
            raise PartitionError(f"{flag}: cannot read {item!r} in {text!r}; expected "
                                 "SCHEME:KEY=VALUE[,KEY=VALUE...], e.g. dirichlet:alpha=0.5")
        kw[key.strip()] = option_value(val)
    if scheme not in SCHEMES:
        raise PartitionError(f"{flag}: unknown scheme {scheme!r}; use shards, iid or "
                             "dirichlet:alpha=A")
    params = inspect.signature(SCHEMES[scheme]).parameters
    accepted = [p for p in params if p not in ("labels", "n_samples", "n_clients", "seed")]
    unknown = sorted(set(kw) - set(accepted))
    if unknown:
        raise PartitionError(f"{flag} {scheme}: unknown option(s) {', '.join(unknown)}; "
                             f"accepted: {', '.join(accepted) or 'none'}")
    missing = [p for p in accepted
               if params[p].default is inspect.Parameter.empty and p not in kw]
    if missing:
        raise PartitionError(f"{flag} {scheme} needs {', '.join(missing)}: e.g. "
                             f"{flag} {scheme}:{missing[0]}=0.5")
    return scheme, kw

"""Federated StackOverflow tag prediction from TensorFlow Federated's files (FedAda2 Table 1).

Expected in ``DIR`` (``--data-dir`` / ``$FEDTOOLKIT_DATA``) or ``DIR/stackoverflow/``, as
TFF's archives unpack (``stackoverflow.tar.bz2``, ``stackoverflow.word_count.tar.bz2``,
``stackoverflow.tag_count.tar.bz2`` from ``storage.googleapis.com/tff-datasets-public``):

* ``stackoverflow_train.h5``, ``stackoverflow_test.h5`` (``stackoverflow_held_out.h5`` is
  not used): HDF5 with one group per user, ``/examples/<client_id>/<feature>``, each feature a
  1-D dataset with one entry per example; used here: ``tokens`` (the text, tokens separated
  by ``" "``) and ``tags`` (the question's tags separated by ``"|"``), byte strings;
* ``stackoverflow.word_count``: one ``word count`` line per word, most frequent first;
* ``stackoverflow.tag_count``: a JSON object ``{tag: count}``.

The task (TFF's ``stackoverflow_lr``, the authors' code ``nn.Linear(10000, 500)``; spec 4.1):
features are the bag of words over the ``vocab_size = 10,000`` most frequent words,
``x_w = (occurrences of w) / (number of tokens)`` (TFF's mean of one-hot vectors with an
out-of-vocabulary bucket that is then dropped); targets are the multi-hot vector of the
``num_tags = 500`` most frequent tags (other tags dropped); the model is multi-label logistic
regression (one sigmoid per tag).

Clients: ``n_clients = 400`` users drawn uniformly without replacement from the training
file's users with ``numpy.random.default_rng(seed)`` (the paper's "randomly selected
400-client subset"; its code draws with ``np.random.seed(123)``, which is not reproducible
here); their examples form the federated training set, one client each. The test set is the
examples of ``n_test_clients`` users (default ``n_clients``) drawn the same way from the test
file (as the authors' code does), pooled. Features are a ``scipy.sparse`` CSR matrix
(float32), targets a dense bool array.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DataError
from .paths import ENV_VAR, find_file_set, resolve_data_dir

__all__ = ["STACKOVERFLOW_FILES", "StackOverflowData", "load_stackoverflow",
           "bag_of_words", "multi_hot"]

STACKOVERFLOW_FILES = {"train": "stackoverflow_train.h5", "test": "stackoverflow_test.h5",
                       "words": "stackoverflow.word_count", "tags": "stackoverflow.tag_count"}
STACKOVERFLOW_DIR = "stackoverflow"


@dataclass(frozen=True, eq=False)
class StackOverflowData:
    """Federated multi-label data: CSR features, bool targets, one index array per client."""
    x_train: object              # scipy.sparse.csr_matrix float32 [N, vocab]
    y_train: np.ndarray          # bool [N, num_tags]
    parts: list                  # one int64 index array into the train rows per client
    x_test: object               # csr float32 [M, vocab]
    y_test: np.ndarray           # bool [M, num_tags]
    words: list
    tags: list
    clients: list                # the chosen training users' ids
    source: str
    name: str = "stackoverflow"

    @property
    def n_clients(self) -> int:
        return len(self.parts)


def _find(data_dir) -> dict[str, Path]:
    root = resolve_data_dir(data_dir)
    cands = [root / STACKOVERFLOW_DIR, root] if root else []
    found = find_file_set(cands, STACKOVERFLOW_FILES, "stackoverflow")
    if found is None:
        where = f"not found in {root} or {root / STACKOVERFLOW_DIR}" if root else "no data directory set"
        raise DataError(
            f"stackoverflow: {where}; unpack TFF's stackoverflow.tar.bz2, "
            "stackoverflow.word_count.tar.bz2 and stackoverflow.tag_count.tar.bz2 so that "
            f"DIR/{STACKOVERFLOW_DIR}/ holds {', '.join(STACKOVERFLOW_FILES.values())}, then "
            f"pass --data-dir DIR or set {ENV_VAR}=DIR")
    return found.files


def _read_words(path: Path, k: int) -> list[str]:
    words = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2:
                raise DataError(f"stackoverflow: {path} line {len(words) + 1} is not "
                                "'word count'")
            words.append(parts[0])
            if len(words) == k:
                break
    if len(words) < k:
        raise DataError(f"stackoverflow: {path} lists {len(words)} words, fewer than "
                        f"vocab_size={k}")
    return words


def _read_tags(path: Path, k: int) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            counts = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"stackoverflow: {path} is not a JSON object of tag counts "
                        f"({type(exc).__name__})") from None
    if not isinstance(counts, dict):
        raise DataError(f"stackoverflow: {path} is not a JSON object of tag counts")
    # most frequent first, ties in file order (TFF sorts by count, stable)
    tags = [t for t, _ in sorted(counts.items(), key=lambda kv: -kv[1])][:k]
    if len(tags) < k:
        raise DataError(f"stackoverflow: {path} lists {len(tags)} tags, fewer than num_tags={k}")
    return tags


def _text(values) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def bag_of_words(sentences: list[str], index: dict[str, int], vocab: int):
    """CSR ``[len(sentences), vocab]``: count of each in-vocabulary word / number of tokens."""
    import scipy.sparse as sp
    rows, cols, vals = [], [], []
    for r, s in enumerate(sentences):
        toks = s.split(" ")
        ids = [index[t] for t in toks if t in index]
        if not ids:
            continue
        u, c = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        rows.append(np.full(len(u), r))
        cols.append(u)
        vals.append(c / len(toks))
    if rows:
        rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    else:
        rows = cols = np.zeros(0, dtype=np.int64)
        vals = np.zeros(0)
    return sp.csr_matrix((vals.astype(np.float32), (rows, cols)),
                         shape=(len(sentences), vocab), dtype=np.float32)


def multi_hot(tag_lists: list[str], index: dict[str, int], k: int) -> np.ndarray:
    """bool ``[len(tag_lists), k]``: which of the ``k`` kept tags each example carries."""
    out = np.zeros((len(tag_lists), k), dtype=bool)
    for r, s in enumerate(tag_lists):
        for t in s.split("|"):
            j = index.get(t)
            if j is not None:
                out[r, j] = True
    return out


def _users(h5, path: Path, n: int, seed: int, what: str) -> list[str]:
    if "examples" not in h5:
        raise DataError(f"stackoverflow: {path} has no /examples group (not a TFF "
                        "StackOverflow file)")
    ids = sorted(h5["examples"].keys())
    if len(ids) < n:
        raise DataError(f"stackoverflow: {path} has {len(ids)} users, fewer than {what}={n}")
    pick = np.random.default_rng(seed).choice(len(ids), n, replace=False)
    return [ids[i] for i in sorted(pick)]


def _client(h5, path: Path, cid: str) -> tuple[list[str], list[str]]:
    g = h5["examples"][cid]
    for key in ("tokens", "tags"):
        if key not in g:
            raise DataError(f"stackoverflow: {path} user {cid} has no '{key}' dataset")
    toks, tags = _text(g["tokens"][()]), _text(g["tags"][()])
    if len(toks) != len(tags):
        raise DataError(f"stackoverflow: {path} user {cid}: {len(toks)} tokens vs "
                        f"{len(tags)} tags entries")
    return toks, tags


def load_stackoverflow(data_dir=None, *, n_clients: int = 400, n_test_clients: int | None = None,
                       seed: int = 0, vocab_size: int = 10_000, num_tags: int = 500,
                       max_examples: int | None = None) -> StackOverflowData:
    """The federated tag-prediction task (module docstring). ``max_examples`` caps each
    client's examples (its first ones; default: all, as the paper)."""
    import h5py
    import scipy.sparse as sp
    for name, val in (("n_clients", n_clients), ("vocab_size", vocab_size), ("num_tags", num_tags)):
        if not isinstance(val, (int, np.integer)) or val < 1:
            raise DataError(f"stackoverflow: {name} must be a positive integer, got {val!r}")
    files = _find(data_dir)
    words = _read_words(files["words"], vocab_size)
    tags = _read_tags(files["tags"], num_tags)
    w_index = {w: i for i, w in enumerate(words)}
    t_index = {t: i for i, t in enumerate(tags)}

    def read(path, n, what, offset):
        try:
            h5 = h5py.File(path, "r")
        except OSError as exc:
            raise DataError(f"stackoverflow: cannot read {path} as HDF5 "
                            f"({' '.join(str(exc).split())})") from None
        with h5:
            users = _users(h5, path, n, seed + offset, what)
            xs, ys, sizes = [], [], []
            for cid in users:
                toks, tg = _client(h5, path, cid)
                if max_examples is not None:
                    toks, tg = toks[:max_examples], tg[:max_examples]
                xs.append(bag_of_words(toks, w_index, vocab_size))
                ys.append(multi_hot(tg, t_index, num_tags))
                sizes.append(len(toks))
        return users, sp.vstack(xs, format="csr"), np.concatenate(ys), np.asarray(sizes)

    users, x_tr, y_tr, sizes = read(files["train"], n_clients, "n_clients", 0)
    if (sizes == 0).any():
        raise DataError(f"stackoverflow: user {users[int(np.argmin(sizes))]} has no examples")
    _, x_te, y_te, _ = read(files["test"], n_test_clients or n_clients, "n_test_clients", 1)
    cuts = np.cumsum(sizes)[:-1]
    parts = [np.asarray(p, dtype=np.int64) for p in np.split(np.arange(int(sizes.sum())), cuts)]
    return StackOverflowData(x_tr, y_tr, parts, x_te, y_te, words, tags, users,
                             str(Path(files["train"]).parent))

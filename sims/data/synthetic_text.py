"""A synthetic federated bag-of-words tag-prediction task: StackOverflow's regime at a size
this CPU can run (FedAda2's DP stand-in, :func:`sims.problems.stackoverflow.sparse_text_problem`).

Nothing is downloaded: the generator is seeded and documented here, and it returns the same
:class:`sims.data.stackoverflow.StackOverflowData` the real loader returns (CSR features,
bool multi-hot targets, one index array per client), so the same model
(:class:`sims.problems.multilabel.MultiLabelLinearProblem`) trains on either.

What it keeps of TFF's StackOverflow as FedAda2 uses it (``stackoverflow_lr``: the bag of the
``vocab`` most frequent words, ``x_w = count_w / tokens``; multi-hot targets of the ``tags``
most frequent tags; one client per user):

* **sparse inputs**: a document holds ``1 + Poisson(doc_tokens - 1)`` tokens (default mean 30),
  so about 24 distinct words of the vocabulary; a client's documents, hence its update's
  weight columns, touch a small share of the words (defaults, seed 0: median 15 % of the
  5,000 words, :func:`update_support`; StackOverflow's is not reported: a user's few dozen
  posts of ~40 in-vocabulary words would touch roughly 10 % of 10,000);
* **Zipf word frequencies**: a token is drawn from the global Zipf law ``p(w) ~ 1 / rank^zipf``
  with probability ``1 - topic_share``, else from its document's topic (below);
* **tags through a planted sparse linear model**: tag ``t`` has ``tag_support`` indicative
  words, drawn uniformly from the words of its home topic (topic ``t mod topics``), with weights
  ``w_tv ~ U(0.5, 1.5) * tag_scale``; ``P(y_t = 1 | x) = sigmoid(b_t + sum_v w_tv x_v)`` with
  ``b_t = tag_bias - tag_zipf * log(rank_t)``, so tag frequencies fall off as a power law as
  StackOverflow's do and a document carries one to a few tags (defaults, seed 0: 2.3 tags a
  document on average, 10 % of documents without one);
* **client heterogeneity**: ``topics`` topics, each ``topic_words`` words (outside the 50 most
  frequent) with their own Zipf weights; a client's documents draw their topic from the
  client's ``Dir(client_alpha)`` mix over topics, and the client's size is log-normal
  (median ``size_median``, log-sd ``size_sigma``, clipped to ``size_range``), as users'
  post counts are;
* **a held-out test set**: ``test_clients`` further clients drawn the same way, pooled (as the
  authors' code pools the test users' examples).

What it does not keep: real language (word co-occurrence beyond topics), the real tag
vocabulary and its label noise, and StackOverflow's scale (10,000 words x 500 tags, 400 users
with hundreds of posts each); the DP stand-in keeps instead the DP noise per round relative to
the clip, ``sigma sqrt(d) / m``, by choosing ``vocab x tags`` for its ``m`` (see the entry's
regime card).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .stackoverflow import StackOverflowData

#: The defaults (the DP stand-in's generator; documented in the module docstring).
DEFAULTS = dict(vocab=5000, tags=63, n_clients=100, test_clients=40, doc_tokens=30,
                zipf=1.0, topics=25, topic_words=200, topic_share=0.5, client_alpha=0.3,
                tag_support=10, tag_scale=120.0, tag_bias=-3.0, tag_zipf=0.5,
                size_median=48, size_sigma=0.8, size_range=(8, 256))


class SyntheticTextError(ValueError):
    """Bad generator parameters (one line)."""


def _zipf(n: int, a: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** a
    return p / p.sum()


def _check(kw: dict) -> None:
    for key in ("vocab", "tags", "n_clients", "doc_tokens", "topics", "topic_words",
                "tag_support", "size_median"):
        if int(kw[key]) < 1:
            raise SyntheticTextError(f"synthetic text: {key} must be >= 1, got {kw[key]}")
    if kw["topic_words"] > kw["vocab"] - 50 or kw["tag_support"] > kw["topic_words"]:
        raise SyntheticTextError("synthetic text: need tag_support <= topic_words <= vocab - 50")
    if not 0 <= kw["topic_share"] <= 1 or kw["client_alpha"] <= 0:
        raise SyntheticTextError("synthetic text: topic_share must be in [0, 1] and "
                                 "client_alpha > 0")
    lo, hi = kw["size_range"]
    if not 1 <= lo <= hi:
        raise SyntheticTextError(f"synthetic text: size_range must be 1 <= lo <= hi, got "
                                 f"{kw['size_range']}")


def synthetic_text(seed: int = 0, **overrides) -> StackOverflowData:
    """The federated data set of the module docstring (``overrides`` of :data:`DEFAULTS`),
    a function of ``seed`` alone."""
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise SyntheticTextError(f"synthetic text: unknown parameter(s) {sorted(unknown)}")
    kw = {**DEFAULTS, **overrides}
    _check(kw)
    rng = np.random.default_rng(seed)
    V, T, K = int(kw["vocab"]), int(kw["tags"]), int(kw["topics"])
    p_global = _zipf(V, kw["zipf"])
    # topics: word sets outside the 50 most frequent words, Zipf-weighted within the topic
    pool = np.arange(min(50, V - kw["topic_words"]), V)
    topic_words = np.stack([rng.choice(pool, kw["topic_words"], replace=False)
                            for _ in range(K)])
    p_topic = _zipf(kw["topic_words"], kw["zipf"])
    # the planted sparse linear model
    W = np.zeros((T, V))
    for t in range(T):
        home = topic_words[t % K]
        support = rng.choice(home, kw["tag_support"], replace=False)
        W[t, support] = rng.uniform(0.5, 1.5, kw["tag_support"]) * kw["tag_scale"]
    b = kw["tag_bias"] - kw["tag_zipf"] * np.log(np.arange(1, T + 1))

    def client_docs(n_docs):
        mix = rng.dirichlet(np.full(K, kw["client_alpha"]))
        topic = rng.choice(K, n_docs, p=mix)
        lengths = 1 + rng.poisson(kw["doc_tokens"] - 1, n_docs)
        rows, cols = [], []
        for j in range(n_docs):
            L = lengths[j]
            from_topic = rng.random(L) < kw["topic_share"]
            words = np.where(from_topic,
                             topic_words[topic[j]][rng.choice(kw["topic_words"], L, p=p_topic)],
                             rng.choice(V, L, p=p_global))
            rows.append(np.full(L, j))
            cols.append(words)
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        vals = (1.0 / lengths)[rows]
        x = sp.csr_matrix((vals.astype(np.float32), (rows, cols)), shape=(n_docs, V))
        x.sum_duplicates()
        z = x @ W.T + b
        y = rng.random(z.shape) < 1.0 / (1.0 + np.exp(-z))
        return x, y

    lo, hi = kw["size_range"]
    sizes = np.clip(np.round(kw["size_median"] * np.exp(kw["size_sigma"]
                                                        * rng.standard_normal(kw["n_clients"]))),
                    lo, hi).astype(int)
    xs, ys, parts, start = [], [], [], 0
    for n in sizes:
        x, y = client_docs(int(n))
        xs.append(x)
        ys.append(y)
        parts.append(np.arange(start, start + n, dtype=np.int64))
        start += n
    tx, ty = [], []
    test_sizes = np.clip(np.round(kw["size_median"] * np.exp(
        kw["size_sigma"] * rng.standard_normal(int(kw["test_clients"])))), lo, hi).astype(int)
    for n in test_sizes:
        x, y = client_docs(int(n))
        tx.append(x)
        ty.append(y)
    return StackOverflowData(
        x_train=sp.vstack(xs).tocsr(), y_train=np.concatenate(ys), parts=parts,
        x_test=sp.vstack(tx).tocsr() if tx else sp.csr_matrix((0, V), dtype=np.float32),
        y_test=np.concatenate(ty) if ty else np.zeros((0, T), bool),
        words=[f"w{i}" for i in range(V)], tags=[f"t{i}" for i in range(T)],
        clients=[f"c{i}" for i in range(kw["n_clients"])],
        source=f"synthetic sparse bag-of-words (seed {seed}; {V} words x {T} tags, "
               f"{kw['n_clients']} clients)", name="synthetic-text")


def update_support(data: StackOverflowData) -> np.ndarray:
    """Per client, the share of the weight coordinates its data can change in one epoch:
    the distinct words in its documents over the vocabulary (every tag's row of those
    columns moves; the other columns' gradients are zero)."""
    V = data.x_train.shape[1]
    return np.array([len(np.unique(data.x_train[p].indices)) / V for p in data.parts])

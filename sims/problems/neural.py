"""A dataset, a partition and a model: the papers' image experiments.

Local work is ``local_epochs`` passes over the client's data in minibatches of
``batch_size`` (Fed-EF Sec. 5: one local epoch, batch 32, the last batch kept partial, spec
6.16), or exactly ``local_steps`` minibatches when that is set (the theory's fixed K).
Minibatches are index arrays padded with -1; padded entries get weight 0, and a step whose
batch is all padding is masked out (clients with less data take fewer steps).

Plain local SGD on a stack of Linear layers (``LogReg``, ``MLP``) runs fused
(:mod:`sims.problems.linear_stack`); an MLP whose clients take several steps of modest total
width runs through the clients' Gram matrices instead (:mod:`sims.problems.gram_sgd`, the
``gram_path`` option). A stack with dropout (``MLPDropout``) takes the hand-batched
minibatch gradient with masks drawn here (:meth:`NeuralProblem.dropout_masks`) and no fused
SGD: every algorithm steps through :meth:`NeuralProblem.stoch_grad`. Any other module
takes the generic ``torch.func`` gradient; with dropout its masks are keyed by each
minibatch's samples too (:meth:`NeuralProblem.keyed_masks`,
:mod:`sims.problems.keyed_dropout`), so no path's draws depend on batching.
"""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from ..core.batching import start_minus, start_rows
from ..core.params import ParamLayout
from .gram_sgd import ClientGram, gram_sgd_delta
from .linear_stack import (hidden_dropout, is_linear_stack, linear_stack_grad,
                           linear_stack_logits, linear_stack_sgd_, linear_stack_sgd_delta)
from .mlp_grad import stack_full_grad_sum, stack_grad, stack_grad_pair
from . import keyed_dropout
from .onednn import use_onednn


def _row_keys(payload: torch.Tensor, salt: torch.Tensor | None = None) -> list[int]:
    """A 63-bit key per row of sample indices ``payload[B, b]`` (-1 = padding): the sum of
    ``(index + 1)`` times an odd constant per position, in wrapping int64 arithmetic (distinct
    rows collide with probability about 2^-63). ``salt[B]`` (int64), where given, is added
    times another odd constant, so one row of samples gets a different key per salt."""
    b = payload.shape[1]
    pos = torch.arange(1, b + 1, dtype=torch.int64) * -7046029254386353131 | 1  # 0x9E37...15
    keys = ((payload.cpu().to(torch.int64) + 1) * pos).sum(1)
    if salt is not None:
        keys = keys + salt.cpu().to(torch.int64) * -4658895280553007687  # 0xBF58476D1CE4E5B9
    return [k & 0x7FFFFFFFFFFFFFFF for k in keys.tolist()]


class NeuralProblem:
    def __init__(self, dataset, parts: list[np.ndarray], model: torch.nn.Module, *,
                 batch_size: int = 32, local_epochs: int = 1, local_steps: int | None = None,
                 eval_train_samples: int | None = None, device="cpu", dtype=torch.float32,
                 eval_chunk: int = 4096, fast_path: bool = True, gram_path: bool | None = None,
                 fast_grad: bool = True, init_seed: int | None = None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if local_steps is None and local_epochs < 1:
            raise ValueError(f"local_epochs must be >= 1, got {local_epochs}")
        if local_steps is not None and local_steps < 1:
            raise ValueError(f"local_steps must be >= 1, got {local_steps}")
        self.dataset = dataset
        self.init_seed = None if init_seed is None else int(init_seed)
        self.parts = [np.asarray(p, dtype=np.int64) for p in parts]
        if any(len(p) == 0 for p in self.parts):
            raise ValueError("every client needs at least one sample")
        self.n_clients = len(self.parts)
        self.batch_size, self.local_epochs, self.local_steps = batch_size, local_epochs, local_steps
        self.device, self.dtype, self.eval_chunk = torch.device(device), dtype, eval_chunk
        self.model = model.to(self.device, dtype)
        self.model.train()  # only dropout depends on the mode (no BatchNorm, see sims.problems.models)
        self.layout = ParamLayout.from_module(self.model)
        self.d = self.layout.d
        self.x = dataset.x_train.to(self.device, dtype)
        self.y = dataset.y_train.to(self.device)
        self.x_test = dataset.x_test.to(self.device, dtype)
        self.y_test = dataset.y_test.to(self.device)
        # The global objective f = (1/n) sum_i f_i (Fed-EF eq. (1)) over the clients' data.
        population = np.concatenate(self.parts)
        self.client_weight = torch.tensor([1.0 / (self.n_clients * len(p)) for p in self.parts],
                                          dtype=dtype)
        if eval_train_samples is not None and eval_train_samples < len(population):
            rng = np.random.default_rng(12345)
            population = rng.choice(population, eval_train_samples, replace=False)
            self.eval_weights = None
        else:
            self.eval_weights = np.concatenate([np.full(len(p), 1.0 / (self.n_clients * len(p)))
                                                for p in self.parts])
        self.eval_index = torch.as_tensor(population, device=self.device)
        # Widths that are a property of the problem, never of a chunk of clients, so a
        # client's arithmetic (and its rounding) does not depend on who it is batched with:
        # the widest minibatch any client takes, and the most local steps any client takes.
        self.batch_width = (batch_size if local_steps is not None else
                            min(batch_size, max(len(p) for p in self.parts)))
        self.max_steps = max(self.steps_for(c) for c in range(self.n_clients))
        self._batched_grad = vmap(grad(self._loss), randomness="different")
        # with dropout: the masks keyed by each minibatch row, drawn outside vmap (so vmap
        # draws nothing: its default randomness raises on any draw)
        self._masked_grad = vmap(grad(self._masked_loss))
        self._sites = None
        self.fast_path = fast_path and is_linear_stack(self.model)
        # dropout after the hidden ReLU: the fast gradient takes masks, the fused SGD paths
        # (no masks) are off
        self.dropout = hidden_dropout(self.model) if self.fast_path else 0.0
        self.fused_sgd = self.fast_path and not self.dropout
        # stoch_grad through sims.problems.mlp_grad (oneDNN products in float32 on the CPU,
        # Mime's anchor gradient with shared weights); False: linear_stack_grad, the reference
        self.fast_grad = fast_grad
        self._eval_grad = vmap(grad(self._sum_loss, has_aux=True), in_dims=(0, None, None, None))
        self.gram_path = self._choose_gram_path(gram_path)
        self._client_gram = None

    # Memory the Gram path may take for its client-major inputs and Gram matrices.
    GRAM_BYTES = 1 << 30

    def _choose_gram_path(self, wanted: bool | None) -> bool:
        """Whether fused local SGD goes through the clients' Gram matrices
        (:mod:`sims.problems.gram_sgd`); a property of the problem, never of a chunk.

        It needs the fused path, an MLP of exactly two layers (the layers above the first
        train through ``sgd_step_``, whose input gradient is one layer's), clients that take several
        steps, and a partition that uses each sample at most once. ``None`` (default) takes
        it where it was measured faster (Fed-EF Figure 8 MLP, 300 samples per client, one
        thread: 1.25x; 600 samples: 0.85x): a first layer at least 64 wide, the widest
        round of local work (``max_steps * batch_width``) at most half the input width, and
        the Gram data within :attr:`GRAM_BYTES`."""
        if wanted is False:
            return False
        usable = self.fused_sgd and len(self.layout.shapes) == 4 and self.max_steps >= 2
        if usable and not wanted:           # auto: also where it pays (cheap checks first)
            out_dim, in_dim = self.layout.shapes[0]
            usable = (out_dim >= 64 and 2 * self.max_steps * self.batch_width <= in_dim + 1
                      and ClientGram.nbytes(self.parts, in_dim, self.x.element_size(),
                                            use_onednn(self.x)) <= self.GRAM_BYTES)
        if usable:
            samples = np.concatenate(self.parts)
            usable = len(np.unique(samples)) == len(samples)
        if wanted and not usable:
            raise ValueError("gram_path=True needs an MLP with one hidden layer, "
                             "clients that take at least 2 local steps and a partition "
                             "that uses each sample at most once")
        return usable

    # ----------------------------------------------------------------- definitions
    def _logits(self, flat, x):
        return functional_call(self.model, self.layout.unflatten(flat), (x,))

    def _loss(self, flat, x, y, w):
        """Mean cross-entropy over the valid (weight 1) samples of one minibatch."""
        losses = F.cross_entropy(self._logits(flat, x), y, reduction="none")
        return (losses * w).sum() / w.sum().clamp_min(1)

    def _masked_loss(self, flat, x, y, w, masks):
        """:meth:`_loss` with the dropout modules multiplying by ``masks`` (one per
        :attr:`dropout_sites` entry) instead of drawing."""
        with keyed_dropout.given_masks(self.model, masks):
            return self._loss(flat, x, y, w)

    def _sum_loss(self, flat, x, y, w):
        losses = F.cross_entropy(self._logits(flat, x), y, reduction="none")
        return (losses * w).sum(), losses.detach()

    def seed_of_init(self, seed: int) -> int:
        """The seed the initial weights are drawn from: the run's ``seed``, or the problem's
        ``init_seed`` when it has one (one initialisation shared by every seed and method, as
        Fed-LAMB's experiments; the run's seed still drives sampling and minibatches)."""
        return int(seed) if self.init_seed is None else self.init_seed

    def init_theta(self, seed: int) -> torch.Tensor:
        """The model's default initialisation under ``torch.manual_seed(seed_of_init(seed))``,
        flattened."""
        torch.manual_seed(self.seed_of_init(seed))
        for module in self.model.modules():
            if hasattr(module, "reset_parameters"):
                module.reset_parameters()
        return self.layout.flatten_module(self.model).to(self.device, self.dtype)

    pad_value = -1  # payload rows the engine adds for clients with fewer steps

    def steps_for(self, client: int) -> int:
        if self.local_steps is not None:
            return self.local_steps
        return self.local_epochs * math.ceil(len(self.parts[client]) / self.batch_size)

    def epoch_steps(self, client: int) -> int:
        """Minibatches in one pass over the client's data (one local epoch)."""
        return math.ceil(len(self.parts[client]) / self.batch_size)

    def plan_client(self, rng: np.random.Generator, client: int) -> np.ndarray:
        """Minibatch indices ``[K, batch_size]`` (-1 = padding) for one round of local work."""
        data = self.parts[client]
        if self.local_steps is None:
            chunks = []
            for _ in range(self.local_epochs):
                order = data[rng.permutation(len(data))]
                nb = math.ceil(len(order) / self.batch_size)
                padded = np.full(nb * self.batch_size, -1, dtype=np.int64)
                padded[: len(order)] = order
                chunks.append(padded.reshape(nb, self.batch_size))
            return np.concatenate(chunks)
        # fixed K: consecutive minibatches from a stream of fresh permutations
        need = self.local_steps * self.batch_size
        reps = math.ceil(need / len(data))
        stream = np.concatenate([data[rng.permutation(len(data))] for _ in range(reps)])
        return stream[:need].reshape(self.local_steps, self.batch_size)

    # ----------------------------------------------------------------- batched path
    def stoch_grad(self, theta: torch.Tensor, clients: torch.Tensor, payload: torch.Tensor):
        """Minibatch gradients ``[B, d]``; ``payload[B, batch]`` holds sample indices (with
        dropout on the fast path, masks from :meth:`dropout_masks`)."""
        return self._grad(theta, payload)

    def _grad(self, theta: torch.Tensor, payload: torch.Tensor,
              salt: torch.Tensor | None = None):
        """:meth:`stoch_grad`, with ``salt`` passed on to :meth:`dropout_masks`."""
        payload = self._trim(payload)
        x, y, w = self.minibatch(payload)
        if self.fast_path:
            masks = self.dropout_masks(payload, theta.dtype, salt)
            if self.fast_grad:
                return stack_grad(theta, self.layout, x, y, w, masks=masks)
            return linear_stack_grad(theta, self.layout, x, y, w, masks=masks)[0]
        return self._keyed_grad(theta, x, y, w, payload, salt)

    def _keyed_grad(self, theta, x, y, w, payload, salt=None):
        """The generic (``torch.func``) minibatch gradients of rows ``payload[B, b]`` (inputs
        ``x``, labels ``y``, weights ``w``), with dropout masks keyed by each row's samples
        (and ``salt[B]``, where given) from :meth:`keyed_masks`."""
        masks = self.keyed_masks(payload, theta.dtype, salt)
        if masks is None:
            return self._batched_grad(theta, x, y, w)
        return self._masked_grad(theta, x, y, w, masks)

    @property
    def dropout_sites(self) -> list:
        """The model's dropout calls in a forward pass
        (:func:`sims.problems.keyed_dropout.dropout_sites`), found once."""
        if self._sites is None:
            self._sites = keyed_dropout.dropout_sites(*self._site_pass())
        return self._sites

    def _site_pass(self):
        """The module and sample whose forward pass fixes the dropout sites' layout."""
        return self.model, self.x[:2]

    def keyed_masks(self, payload: torch.Tensor, dtype,
                    salt: torch.Tensor | None = None) -> list[torch.Tensor] | None:
        """The generic path's dropout masks for minibatch rows ``payload[B, b]`` (-1 =
        padding): one ``[B, b, ...]`` per dropout call, each row's drawn from a generator
        seeded by the key of its valid sample indices (:func:`_row_keys`, with ``salt[r]``
        mixed in where given), as ``torch.nn.Dropout`` draws them
        (:mod:`sims.problems.keyed_dropout`); so a row's masks are a function of its
        minibatch alone, whichever rows share the chunk. None without dropout or outside
        training."""
        if not self.model.training or not self.dropout_sites:
            return None
        rows = payload.cpu()
        valid = rows >= 0
        keys = [_row_keys(rows[r][valid[r]][None],
                          None if salt is None else salt[r:r + 1])[0]
                if bool(valid[r].any()) else None for r in range(len(rows))]
        return keyed_dropout.draw_masks(self.dropout_sites, keys, valid, dtype, self.device)

    def dropout_masks(self, payload: torch.Tensor, dtype,
                      salt: torch.Tensor | None = None) -> list[torch.Tensor] | None:
        """The fast gradient's dropout masks for minibatch rows ``payload[B, b]``: one
        ``[B, b, width]`` per hidden layer, 0 or ``1 / (1 - p)`` (with probability ``1 - p``),
        as ``torch.nn.Dropout`` in training mode; None without dropout or outside training.

        Each row's masks come from a generator seeded by a hash of the row's sample indices,
        so they are a function of the minibatch alone: the same whichever clients it is
        batched with and after a resume from a checkpoint (the run's seed fixes every
        minibatch, so it fixes the masks), and the same for every method on the same draws.
        (The generic path keys its masks the same way, drawn as ``torch.nn.Dropout`` draws:
        :meth:`keyed_masks`.) Two gradients on one minibatch (Mime's pair) share masks.
        ``salt[B]`` (:meth:`full_grad`'s) is mixed into the keys: a client's whole data is
        the same index row every round, so without it every round would reuse its masks."""
        if not self.dropout or not self.model.training:
            return None
        keep = 1.0 - self.dropout
        B, b = payload.shape
        widths = [shape[0] for shape in self.layout.shapes[0:-2:2]]
        keys = _row_keys(payload, salt)
        out = [torch.empty((B, b, n), dtype=dtype) for n in widths]
        gen = torch.Generator()
        for r in range(B):
            gen.manual_seed(keys[r])
            for m in out:
                torch.rand(m.shape[1:], generator=gen, dtype=dtype, out=m[r])
        return [m.lt_(keep).div_(keep).to(self.device) for m in out]

    def stoch_grad_pair(self, theta: torch.Tensor, server: torch.Tensor, rep: torch.Tensor,
                        clients: torch.Tensor, payload: torch.Tensor, at_start: bool = False):
        """``(stoch_grad(theta), stoch_grad(server[rep]))`` on the same minibatch (Mime's
        ``grad f_i(y; z)`` and anchor ``grad f_i(x; z)``). The fast gradient gathers the
        minibatch once and runs the anchor's products with each replica's shared weights
        (:func:`sims.problems.mlp_grad.stack_grad_pair`); ``at_start`` (the caller's promise
        that ``theta`` is ``server[rep]``, a client's first local step) then evaluates once
        and returns the anchor and a copy of it, so ``g - anchor`` is exactly 0 there.
        Otherwise (and with dropout) two :meth:`stoch_grad` calls in that order: on the
        fast path they share the minibatch's dropout masks (:meth:`dropout_masks`), and on
        the generic path too (:meth:`keyed_masks`: the same row, the same key)."""
        if self.fast_path and self.fast_grad and not self.dropout:
            x, y, w = self.minibatch(payload)
            if at_start:
                anchor = stack_grad_pair(None, server, rep, self.layout, x, y, w)[1]
                return anchor.clone(), anchor
            return stack_grad_pair(theta, server, rep, self.layout, x, y, w)
        return (self.stoch_grad(theta, clients, payload),
                self.stoch_grad(start_rows(server, rep), clients, payload))

    def minibatch(self, payload: torch.Tensor):
        """Inputs, labels and weights (0 = padding) of index rows ``payload[..., b]``.

        Columns beyond :attr:`batch_width` that are padding in every row are dropped first
        (in a plan's rows they always are: clients of 25 samples with batch 32 compute on
        25, whoever they are batched with), then ``index_select`` on the flattened inputs:
        faster than ``x[idx]`` advanced indexing for MNIST-sized rows (``docs/speed.md``)."""
        payload = self._trim(payload)
        x = self.x.reshape(len(self.x), -1).index_select(0, payload.clamp_min(0).reshape(-1))
        return (x.view(*payload.shape, *self.x.shape[1:]), *self._labels_weights(payload))

    def _labels_weights(self, payload: torch.Tensor):
        """Labels and weights (0 = padding) of index rows ``payload``."""
        y = self.y.index_select(0, payload.clamp_min(0).reshape(-1)).view(payload.shape)
        return y, (payload >= 0).to(self.dtype)

    def _trim(self, payload: torch.Tensor) -> torch.Tensor:
        """``payload`` without the columns beyond :attr:`batch_width` when they are padding in
        every row."""
        if payload.shape[-1] > self.batch_width and not bool(
                (payload[..., self.batch_width:] >= 0).any()):
            payload = payload[..., : self.batch_width]
        return payload

    def local_sgd_(self, theta: torch.Tensor, clients, payload: torch.Tensor, lr: float):
        """All local steps of plain SGD at once (``payload[B, K, batch]``), in place on
        ``theta`` (returned), or None when this problem has no fused path (the engine then
        steps through ``stoch_grad``)."""
        if not self.fused_sgd:
            return None
        return linear_stack_sgd_(theta, self.layout, lambda k: self.minibatch(payload[:, k]),
                                 payload.shape[1], lr)

    def local_sgd_delta(self, server: torch.Tensor, rep: torch.Tensor, clients,
                        payload: torch.Tensor, lr: float):
        """``theta_start - theta_end`` of all local steps of plain SGD, participant ``b``
        starting from ``server[rep[b]]`` (:func:`linear_stack_sgd_delta`, or
        :func:`sims.problems.gram_sgd.gram_sgd_delta` where :attr:`gram_path` is set), or
        None."""
        if not self.fused_sgd:
            return None
        if self.gram_path:
            if self._client_gram is None:
                self._client_gram = ClientGram(self.x, self.parts)
            payload = self._trim(payload)
            return gram_sgd_delta(server, rep, torch.as_tensor(clients, device=self.device),
                                  self.layout, self._client_gram, payload,
                                  *self._labels_weights(payload), lr)
        return linear_stack_sgd_delta(server, rep, self.layout,
                                      lambda k: self.minibatch(payload[:, k]),
                                      payload.shape[1], lr, one_step=self.max_steps == 1)

    def local_sgd_affine(self, server: torch.Tensor, rep: torch.Tensor, clients,
                         payload: torch.Tensor, step_mask: torch.Tensor, rule):
        """:meth:`local_sgd_delta` for local SGD with linear extras
        (:class:`sims.rules.terms.AffineSGD`: weight decay, proximal term, SCAFFOLD / FedCM
        corrections), or None. Plain SGD takes :meth:`local_sgd_delta` (the Gram path where
        it is chosen); otherwise gathered copies train in place
        (:func:`linear_stack_sgd_` with ``decay`` and ``shift``)."""
        if not self.fused_sgd:
            return None
        if rule.plain:
            return self.local_sgd_delta(server, rep, clients, payload, rule.lr)
        theta = start_rows(server, rep)
        linear_stack_sgd_(theta, self.layout, lambda k: self.minibatch(payload[:, k]),
                          payload.shape[1], rule.lr, rule.decay, rule.shift, step_mask)
        return start_minus(server, rep, theta, out=theta)

    def local_sgd(self, theta: torch.Tensor, clients, payload: torch.Tensor, lr: float):
        """:meth:`local_sgd_` on a copy (``theta`` is left as it was), or None."""
        if not self.fused_sgd:
            return None
        return self.local_sgd_(theta.clone(memory_format=torch.contiguous_format), clients,
                               payload, lr)

    def generic_grad(self, theta: torch.Tensor, payload: torch.Tensor):
        """The same through ``torch.func`` (vmap of grad): works for any module."""
        return self._batched_grad(theta, *self.minibatch(payload))

    def full_grad(self, theta: torch.Tensor, clients: torch.Tensor,
                  salt: torch.Tensor | None = None) -> torch.Tensor:
        """Each row's full local gradient ``grad f_i(theta_b)`` ``[B, d]``, ``f_i`` = the mean
        loss over client ``i``'s samples (Fed-EF eq. (1)); Mime's ``c`` averages these.
        With dropout, each row's masks are keyed by its samples and ``salt[b]`` (the engine
        passes one per seed and round, :func:`sims.core.engine.draw_salt`), so each round and
        seed draws fresh masks; without ``salt`` they depend on the samples alone.

        Each client's data is one padded index row, cut into column blocks of up to 256
        samples; a block's :meth:`stoch_grad` (the mean over its valid samples) is weighted
        by its share of the client's samples. Rows and blocks are sized to keep the gathered
        inputs and the ``[rows, d]`` outputs near the engine's chunk budget."""
        from ..core.malloc import CHUNK_BYTES
        parts = [self.parts[int(c)] for c in clients.tolist()]
        width = max(len(p) for p in parts)
        index = np.full((len(parts), width), -1, dtype=np.int64)
        for j, p in enumerate(parts):
            index[j, : len(p)] = p
        index = torch.as_tensor(index, device=theta.device)
        sizes = torch.as_tensor([len(p) for p in parts], device=theta.device, dtype=theta.dtype)
        cols = min(width, max(self.batch_size, 256))
        per_row = max(2 * self.d, cols * self.x[0].numel()) * theta.element_size()
        rows = int(max(1, min(4096, CHUNK_BYTES // per_row)))
        out = torch.zeros_like(theta)
        for lo in range(0, len(parts), rows):
            th = theta[lo:lo + rows]
            for s in range(0, width, cols):
                block = index[lo:lo + rows, s:s + cols]
                share = (block >= 0).sum(1).to(theta.dtype) / sizes[lo:lo + rows]
                if bool((share > 0).any()):
                    g = self._grad(th, block, None if salt is None else salt[lo:lo + rows])
                    out[lo:lo + rows] += g * share.unsqueeze(-1)
        return out

    def full_grad_sum(self, server: torch.Tensor, rep: torch.Tensor, clients: torch.Tensor):
        """``[R, d]``: row ``r`` the sum of :meth:`full_grad` at ``server[r]`` over the rows
        ``b`` with ``rep[b] == r`` (what the engine's round gradient sums per replica), each
        replica's participants' samples in one product per layer
        (:func:`sims.problems.mlp_grad.stack_full_grad_sum`); None without the fast gradient
        (the engine then sums :meth:`full_grad`, whose gradients draw dropout masks)."""
        if not (self.fast_path and self.fast_grad) or self.dropout:
            return None
        out = torch.zeros_like(server)
        x_flat = self.x.reshape(len(self.x), -1)
        rep_np, cli_np = np.asarray(rep.tolist()), np.asarray(clients.tolist())
        for r in np.unique(rep_np):
            parts = [self.parts[c] for c in cli_np[rep_np == r]]
            index = torch.as_tensor(np.concatenate(parts), device=self.device)
            weight = torch.as_tensor(np.concatenate([np.full(len(p), 1.0 / len(p))
                                                     for p in parts]),
                                     dtype=server.dtype, device=self.device)
            out[int(r)] = stack_full_grad_sum(server[int(r)], self.layout, x_flat, self.y,
                                              index, weight)
        return out

    # ----------------------------------------------------------------- reference path
    def reference_grad(self, theta: torch.Tensor, client: int, payload: np.ndarray):
        """One client's minibatch gradient with a plain module and autograd."""
        idx = torch.as_tensor(payload[payload >= 0], device=self.device)
        self.layout.load_into(self.model, theta)
        self.model.zero_grad()
        loss = F.cross_entropy(self.model(self.x[idx]), self.y[idx])
        loss.backward()
        return torch.cat([p.grad.reshape(-1) for p in self.model.parameters()])

    def reference_full_grad(self, theta: torch.Tensor, client: int):
        """One client's full local gradient: its whole data as one minibatch, plainly."""
        return self.reference_grad(theta, client, self.parts[client])

    # ----------------------------------------------------------------- evaluation
    @torch.no_grad()
    def _accuracy(self, theta, x, y):
        correct = torch.zeros(theta.shape[0], device=self.device)
        loss = torch.zeros(theta.shape[0], device=self.device, dtype=self.dtype)
        logits_fn = vmap(self._logits, in_dims=(0, None))
        if self.fast_path:
            def logits_fn(th, xx):
                return linear_stack_logits(th, self.layout, xx.expand(th.shape[0], *xx.shape))
        for s in range(0, len(y), self.eval_chunk):
            logits = logits_fn(theta, x[s:s + self.eval_chunk])
            yy = y[s:s + self.eval_chunk]
            correct += (logits.argmax(-1) == yy).sum(-1)
            loss += F.cross_entropy(logits.flatten(0, 1), yy.repeat(theta.shape[0]),
                                    reduction="none").view(theta.shape[0], -1).sum(-1)
        return correct / len(y), loss / len(y)

    def _eval_w(self, s: int, size: int) -> torch.Tensor:
        """Weights of evaluation samples ``s .. s + size`` in the global objective."""
        if self.eval_weights is None:
            return torch.full((size,), 1.0 / len(self.eval_index), dtype=self.dtype,
                              device=self.device)
        return torch.as_tensor(self.eval_weights[s:s + size], dtype=self.dtype,
                               device=self.device)

    def evaluate(self, theta: torch.Tensor, test: bool = True) -> dict[str, torch.Tensor]:
        """Train loss and squared full-gradient norm of f at each server model ``theta[R, d]``.

        The gradient is of the global objective ``f = (1/n) sum_i f_i`` (Fed-EF eq. (1);
        client losses weighted equally), over every training sample of the population or a
        fixed random subset of ``eval_train_samples`` (spec 4.8 reading of "squared gradient
        norm").
        """
        was_training = self.model.training
        self.model.eval()
        g = torch.zeros_like(theta)
        loss = torch.zeros(theta.shape[0], dtype=self.dtype, device=self.device)
        n_eval = len(self.eval_index)
        for s in range(0, n_eval, self.eval_chunk):
            idx = self.eval_index[s:s + self.eval_chunk]
            w = self._eval_w(s, len(idx))
            if self.fast_path:
                R = theta.shape[0]
                gc, lc = linear_stack_grad(theta, self.layout, self.x[idx].expand(R, *self.x[idx].shape),
                                           self.y[idx].expand(R, -1), w.expand(R, -1),
                                           normalize=False)
            else:
                gc, losses = self._eval_grad(theta, self.x[idx], self.y[idx], w)
                lc = (losses * w).sum(-1)
            g += gc
            loss += lc
        out = {"train_loss": loss, "grad_norm2": (g * g).sum(-1)}
        if test and len(self.y_test):
            acc, tl = self._accuracy(theta, self.x_test, self.y_test)
            out.update(test_acc=acc, test_loss=tl)
        self.model.train(was_training)
        return out

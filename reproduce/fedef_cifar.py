"""Fed-EF Figures 6 and 7: ResNet-18 (GroupNorm) on CIFAR-10, p = 0.5 and p = 0.1.

The paper's setting (Sec. 5.3, spec 4.1-4.7): CIFAR-10, ``n = 200`` label-shard clients (two
single-class shards of 125 images: 250 images, 8 local steps of batch 32 per round), 200
rounds, Fed-EF-SGD (``eta = 1``, ``eta_l = 0.1``) and Fed-EF-AMS (``eta = 1e-3``,
``eta_l = 1e-2``) with layer-wise TopK, Sign and heavy-Sign, against full precision.
Figure 6 is ``p = 0.5``, Figure 7 ``p = 0.1``; in each, rows SGD / AMS, one panel per
compressor family against rounds, and a last panel of test accuracy against uplink bits
with the curves chosen by the paper's rule (the highest compression that reaches full
precision within 0.1 points, else the best).

Model: :class:`sims.problems.models.ResNet18GN` (CIFAR variant, GroupNorm with 2 groups; the paper
names ResNet-18 and leaves normalisation open, spec 4.3). Training augmentation (spec 4.1):
random 32x32 crops of the image padded by 4 black pixels and random horizontal flips, drawn
per sample for every local minibatch as part of the engine's seeded round plan
(:class:`sims.problems.conv.ConvProblem`, ``--augment crop-flip``; ``--augment none`` turns
it off). Images are normalised per channel (:mod:`sims.data.base`).

CIFAR-10 is read from ``--data-dir`` (``DIR/cifar-10-batches-py``). The default is the
paper's setting with the settings its text singles out (Sign, TopK-0.01, heavy-Sign-0.1) for
one seed, and needs a GPU (``--device cuda``); ``--full`` adds the whole compressor grids and
3 seeds. On a CPU only ``--tiny`` is sensible (one round on a handful of images; the tests
run it on fixture files); other CPU runs need ``--cpu-ok``.

On a GPU the engine runs up to 25 participants at once (``--max-batch`` sets it; the engine's
own 32 MiB rule would cap ResNet-18 chunks at 8 clients). The evaluation leaves out the
squared full-gradient norm, which the figures do not plot (``--grad-norm`` adds it).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt

from sims.core.participation import Participation

from . import common, plotting
from . import verdicts as vd
from .fedef_images import (FAMILY_LABEL, LRS, SERVER_LABEL, _family_panel, _with_bits,
                           clients_per_round, compressor, conv_problem, family, fed_ef, finals,
                           gpu_max_batch, items, log_x, param_of, participations, population,
                           select, setting_label)

PAPER, TARGET = "Fed-EF", "Figures 6-7"
TITLE = "ResNet-18 (GroupNorm) on CIFAR-10: Fed-EF-SGD and -AMS with TopK, Sign, heavy-Sign"
GPU_ONLY = True          # the report: "not run here: GPU only" until a GPU run is filed
DEFAULT_COST = ("GPU only (--data-dir with CIFAR-10, --device cuda): paper scale, 16 runs of "
                "200 rounds, several GPU-hours (not run here); on this CPU only --tiny "
                "(one round of 2 clients, ~5 s)")

FULL_GRID = "full,sign,topk-0.001,topk-0.01,topk-0.05,hvsign-0.01,hvsign-0.05,hvsign-0.1"
FIG = {0.5: 6, 0.1: 7}


@dataclass
class Config(common.EntryConfig):
    seeds: int = 1
    rounds: int = 200
    ps: str = "0.5,0.1"
    servers: str = "sgd,ams"
    compressors: str = "full,sign,topk-0.01,hvsign-0.1"
    n: int = 200
    samples_per_client: int = 250
    eval_every: int = 5
    eval_train: int = 5000            # training samples for the train loss (0: all)
    test_samples: int = 0             # 0: the whole test set
    augment: str = "crop-flip"        # or none
    hv_scale: str = "kept"
    cpu_ok: bool = False
    threads: int = 1
    grad_norm: bool = False           # also evaluate grad_norm2 (a backward pass; not plotted)

    def scale(self):
        if self.full:
            self.seeds, self.compressors = 3, FULL_GRID
        if self.tiny:
            self.seeds, self.rounds, self.n, self.samples_per_client = 1, 1, 2, 5
            self.ps, self.servers, self.compressors = "0.5", "sgd", "full,sign"
            self.eval_every, self.eval_train, self.test_samples = 1, 8, 0
            self.cpu_ok = True

    def run_key(self):
        key = super().run_key()
        for k in ("ps", "servers", "compressors", "cpu_ok", "grad_norm"):
            key.pop(k, None)
        return key


def runs(cfg):
    common.refuse_cpu_default(cfg, "the paper's GPU scale (ResNet-18, 200 clients, 200 "
                              "rounds)", "a one-round check")
    if cfg.augment not in ("crop-flip", "none"):
        raise common.EntryError(f"--augment must be crop-flip or none, got {cfg.augment!r}")
    augment = None if cfg.augment == "none" else cfg.augment
    n = population("cifar10", cfg.n, cfg.samples_per_client, cfg.data_dir)
    out = []
    for p in participations(cfg.ps):
        m = clients_per_round(p, n)
        for server in items(cfg.servers):
            if server not in SERVER_LABEL:
                raise common.EntryError(f"--servers: {server!r} is not sgd or ams")
            for spec in items(cfg.compressors):
                if family(spec) not in ("full", "sign", "topk", "hvsign"):
                    raise common.EntryError(f"--compressors: {spec!r} (Figs. 6-7 use full, "
                                            "sign, topk-K, hvsign-K)")
                compressor(spec, cfg.hv_scale)

                def build(p=p, server=server, spec=spec, m=m):
                    prob = conv_problem("cifar10", "resnet18", cfg.n, cfg.samples_per_client,
                                        cfg.data_dir, cfg.device, cfg.eval_train,
                                        cfg.test_samples, augment)
                    return (prob, fed_ef("cifar10", server, spec, cfg.hv_scale),
                            Participation("fixed", m=m))
                eta, eta_l = LRS[("cifar10", server)]
                params = {"dataset": "cifar10", "p": p, "n": n, "m": m, "server": server,
                          "compressor": spec, "family": family(spec), "param": param_of(spec),
                          "eta": eta, "eta_l": eta_l}
                out.append(common.Run(f"cifar10_p{p:g}_{server}_{spec}", params, build,
                                      eval_every=cfg.eval_every, eval_grad=cfg.grad_norm,
                                      max_batch=gpu_max_batch(cfg, min(m, 25))))
    return out


def plot(df, cfg):
    paths = []
    servers = [s for s in ("sgd", "ams") if s in set(df.server)]
    fams = [f for f in ("topk", "sign", "hvsign") if f in set(df.family)] or ["full"]
    final = finals(df, cfg.rounds)
    chosen = select(final)
    colors = {"sign": "tab:red", "topk": "tab:blue", "hvsign": "tab:green", "full": "black"}
    for p, sub in df.groupby("p"):
        n, m = int(sub.n.iloc[0]), int(sub.m.iloc[0])
        fig, axes = plt.subplots(len(servers), len(fams) + 1, squeeze=False,
                                 figsize=(4.2 * (len(fams) + 1), 3.3 * len(servers)))
        bits = _with_bits(sub)
        for i, server in enumerate(servers):
            for j, fam in enumerate(fams):
                ax = axes[i][j]
                _family_panel(ax, sub[sub.server == server], "test_acc", fam)
                ax.set_title(f"{SERVER_LABEL[server]}: {FAMILY_LABEL[fam]}", fontsize=10)
                ax.set_ylabel("test accuracy")
                ax.legend(fontsize=7)
            ax = axes[i][-1]
            picked = chosen[(chosen.p == p) & (chosen.server == server)]
            for _, r in picked.iterrows():
                rows = bits[(bits.server == server) & (bits.compressor == r.compressor)]
                plotting.band_plot(ax, rows, "test_acc", "family", x="bits",
                                   palette=[colors[r.family]],
                                   linestyle="--" if r.family == "full" else "-",
                                   label=lambda _, s=r.compressor: setting_label(s))
            log_x(ax)
            ax.set(xlabel="uplink bits per client (cumulative)", ylabel="test accuracy",
                   title=f"{SERVER_LABEL[server]}: chosen settings")
            ax.legend(fontsize=7)
        num = FIG.get(float(p))
        fig.suptitle(f"{'Fig. ' + str(num) + ': ' if num else ''}CIFAR-10 ResNet-18 (GN) test "
                     f"accuracy, n={n}, p={p:g} (m={m}), {cfg.seeds} seed(s)")
        paths += plotting.save(fig, cfg.figures, f"fedef_fig{num}" if num else
                               f"fedef_cifar_p{p:g}")
    return paths


#: The figures this entry draws (stems under ``figures/``), for the report and the ledger.
FIGURES = ("fedef_fig6", "fedef_fig7")
CLAIMS = vd.claims(
    vd.Claim("E8", "Fed-EF", "CIFAR-10 / ResNet-18, p = 0.5, 200 rounds: both Fed-EF variants "
             "reach full precision's test accuracy (Sign 32x, TopK-0.01 100x, hv-Sign-0.1 300x "
             "fewer bits)", "about equal", "Fig. 6; spec 5 E8"),
    vd.Claim("E9", "Fed-EF", "CIFAR-10, p = 0.1: Fed-EF-SGD with every compressor matches full "
             "precision", "about equal", "Fig. 7; spec 5 E9"),
)
MATCH = 0.01


def check(df, cfg):
    final = finals(df, cfg.rounds)
    chosen = select(final)
    lines = []
    from . import regime as rg
    out = []
    for (p, server), grp in final.groupby(["p", "server"]):
        fp = grp[grp.family == "full"]
        lines.append(f"CIFAR-10 p={p:g} {SERVER_LABEL[server]}: final test accuracy (%) "
                     + ", ".join(f"{r.compressor} " + (f"diverged at round {int(r.diverged_at)}"
                                                       if r.diverged else f"{r.acc:.2f}")
                                 for _, r in grp.iterrows()))
        if not len(fp):
            continue
        fp_bits = float(fp.bits.iloc[0])
        seeds = lambda spec: vd.per_seed(df, "test_acc", "final",  # noqa: E731
                                         run=f"cifar10_p{p:g}_{server}_{spec}")
        sel = chosen[(chosen.p == p) & (chosen.server == server) & (chosen.family != "full")]
        parts = []
        for _, r in sel.iterrows():
            lines.append(f"  {setting_label(r.compressor)} ({r.rule}): "
                         f"{fp_bits / r.bits:.0f}x fewer uplink bits")
            parts.append(vd.about_equal(CLAIMS["E8"], seeds(r.compressor),
                                        seeds(fp.compressor.iloc[0]), MATCH, unit="pp",
                                        scale=100, what=f"{setting_label(r.compressor)} - full "
                                                        "precision"))
        n = int(df["n"].iloc[0]) if "n" in df else cfg.n
        card = rg.RegimeCard([rg.clients(n, 200, source="Sec. 5"),
                              rg.horizon(cfg.rounds, 200, source="Figs. 6-7: 200 rounds"),
                              rg.seeds(cfg.seeds, 3, "Sec. 5")])
        cid = "E8" if float(p) == 0.5 else "E9"
        if parts:
            out.append(vd.every(CLAIMS[cid], parts, what="every Fed-EF compressor within 1 "
                                "point of full precision", card=card,
                                protocol="paper: Table 1's rates",
                                scope=f"p={p:g}, {SERVER_LABEL[server]}"))
    return lines + out


if __name__ == "__main__":
    raise SystemExit(common.main(sys.modules[__name__]))

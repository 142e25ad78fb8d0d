"""A sweep's figures: the grid figure and the ranked-sweep figure (FedAda2 Figs. 3, 6, 7).

* :func:`grid_figure` -- one panel per swept hyperparameter: the rule's score against the
  hyperparameter's value, one line per algorithm. Where other hyperparameters are swept too,
  each value shows the best score over them (the profile the selection sees); bars are the
  standard deviation over seeds of that point. Diverged points are drawn as crosses at the
  panel's bottom.
* :func:`ranked_figure` -- one panel per algorithm: every run of the sweep (each grid point,
  mean over seeds) as a curve of test accuracy against rounds, coloured by its rank in final
  test loss, lighter = lower loss, as FedAda2 Figures 3 (bottom), 6 and 7 draw them. Without
  a test loss (a quadratic) the training loss ranks and is drawn.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from .select import get_rule


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: Path) -> list[Path]:
    path.parent.mkdir(parents=True, exist_ok=True)
    out = [path.with_suffix(".png"), path.with_suffix(".pdf")]
    for p in out:
        fig.savefig(p, dpi=120, bbox_inches="tight")
    return out


def _numeric(values) -> bool:
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(np.isfinite(arr).all())


def grid_figure(summary: pd.DataFrame, columns: list[str], path: Path,
                title: str = "") -> list[Path]:
    plt = _plt()
    rule = get_rule(summary["rule"].iloc[0])
    columns = [c for c in columns if c in summary]
    n = max(1, len(columns))
    width = max(6.0, 4.2 * n)
    fig, axes = plt.subplots(1, n, figsize=(width, 3.8), squeeze=False)
    algs = list(dict.fromkeys(summary["algorithm"]))
    colors = plt.get_cmap("tab10")
    for ax, col in zip(axes[0], columns or [None]):
        if col is None:
            ax.text(0.5, 0.5, "no swept hyperparameter", ha="center", transform=ax.transAxes)
            continue
        all_vals = summary[col].dropna()
        numeric = _numeric(all_vals)
        cats = list(dict.fromkeys(all_vals.astype(str))) if not numeric else None
        finite = summary["score"][np.isfinite(summary["score"].astype(float))
                                  & ~summary["diverged"]]
        floor = float(finite.min()) if len(finite) else 0.0
        for i, alg in enumerate(algs):
            sub = summary[(summary["algorithm"] == alg) & summary[col].notna()]
            if sub.empty:
                continue
            ok = sub[np.isfinite(sub["score"].astype(float)) & ~sub["diverged"]]
            if not ok.empty:
                pick = ok.loc[(ok["score"] if rule.best == "max" else -ok["score"])
                              .groupby(ok[col].astype(str)).idxmax()]
                x = pick[col].astype(float) if numeric else pick[col].astype(str).map(cats.index)
                order = np.argsort(np.asarray(x, dtype=float))
                xs = np.asarray(x, dtype=float)[order]
                ys = pick["score"].to_numpy(dtype=float)[order]
                err = pick["score_std"].fillna(0).to_numpy(dtype=float)[order]
                ax.errorbar(xs, ys, yerr=err, marker="o", ms=4, lw=1.5, capsize=2,
                            color=colors(i % 10), label=alg)
            bad = sub.drop(ok.index)
            if not bad.empty:
                xb = bad[col].astype(float) if numeric else bad[col].astype(str).map(cats.index)
                ax.scatter(xb, np.full(len(bad), floor), marker="x", color=colors(i % 10),
                           label=f"{alg} (diverged)")
        if numeric:
            vals = np.asarray(all_vals, dtype=float)
            if (vals > 0).all() and vals.max() / vals.min() >= 20:
                ax.set_xscale("log")
        else:
            ax.set_xticks(range(len(cats)), cats, rotation=30, ha="right")
        ax.set_xlabel(col)
        ax.set_ylabel(f"{rule.statistic} {rule.metric.replace('_', ' ')}"
                      + (" (last 10 points)" if rule.statistic == "last10" else ""))
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(textwrap.fill(title or f"grid: {rule.name}", int(width * 14)), fontsize=9)
    fig.tight_layout()
    out = _save(fig, path)
    plt.close(fig)
    return out


def ranked_figure(table: pd.DataFrame, path: Path, title: str = "", *, by: str = "algorithm",
                  panels: list | None = None, ncols: int | None = None,
                  titles: dict | None = None, title_colors: dict | None = None,
                  footer: str | None = None) -> list[Path]:
    """One panel per value of ``by`` (``panels``: their order, default as they come; ``ncols``
    panels a row, default all in one row; ``titles`` / ``title_colors``: a panel's title and
    its colour, as FedAda2 Figs. 6-7 colour rows by method), every run coloured by its rank in
    final test loss (module docstring). ``footer``: a line under the figure."""
    plt = _plt()
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import ListedColormap, Normalize
    from matplotlib.ticker import MaxNLocator
    has_test = (table["metric"] == "test_loss").any() and (table["metric"] == "test_acc").any()
    rank_metric, y_metric = ("test_loss", "test_acc") if has_test else ("train_loss",
                                                                         "train_loss")
    algs = list(panels) if panels is not None else list(dict.fromkeys(table[by]))
    ncols = ncols or len(algs)
    nrows = -(-len(algs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.0 * ncols, 3.3 * nrows + 0.3),
                             squeeze=False, sharey=True)
    cmap = ListedColormap(plt.get_cmap("Blues")(np.linspace(0.25, 1.0, 256)))
    for i, alg in enumerate(algs):
        ax = axes[i // ncols][i % ncols]
        sub = table[table[by] == alg]
        if sub.empty:
            ax.text(0.5, 0.5, "no results", ha="center", transform=ax.transAxes)
            ax.set_title((titles or {}).get(alg, str(alg)), fontsize=9)
            continue
        curves = (sub[sub["metric"] == y_metric]
                  .groupby(["point", "round"])["value"].mean().unstack("point"))
        final = (sub[sub["metric"] == rank_metric].sort_values("round")
                 .groupby(["point", "seed"])["value"].last().groupby("point").mean())
        final = final.reindex(curves.columns)
        key = final.where(np.isfinite(final), np.inf)
        order = key.sort_values(kind="stable").index            # lowest loss first
        n = len(order)
        shade = {p: i / max(n - 1, 1) for i, p in enumerate(order)}
        for p in reversed(order):                               # best drawn last, on top
            ax.plot(curves.index, curves[p], color=cmap(shade[p]), lw=1.2)
        ax.set_title(f"{(titles or {}).get(alg, alg)} ({n} runs)", fontsize=9,
                     color=(title_colors or {}).get(alg, "black"))
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
        sm = ScalarMappable(norm=Normalize(1, max(n, 2)), cmap=cmap)
        cbar = fig.colorbar(sm, ax=ax, fraction=0.05, pad=0.02)
        cbar.ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        cbar.set_label(f"rank by final {rank_metric.replace('_', ' ')}", fontsize=7)
        cbar.ax.invert_yaxis()
        if i % ncols == 0:
            ax.set_ylabel(y_metric.replace("_", " "))
        if y_metric == "train_loss":
            ax.set_yscale("log")
    for j in range(len(algs), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    fig.suptitle(textwrap.fill(title or "ranked sweep (lighter = lower final loss)",
                               int(26 * ncols)), fontsize=10)
    fig.tight_layout()
    if footer:
        fig.text(0.5, -0.01, footer, ha="center", va="top", fontsize=8, color="0.25")
    out = _save(fig, path)
    plt.close(fig)
    return out

"""One plotting style for every entry: mean over seeds with a band across seeds."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)


def curves(df: pd.DataFrame, metric: str, hue: str, x: str = "round") -> dict:
    """``{hue value: (x, mean, low, high)}`` over seeds; the band runs from the lowest to the
    highest seed (with a handful of seeds a +/- std band dips below zero on log axes)."""
    out = {}
    sub = df[df.metric == metric]
    for key, grp in sub.groupby(hue, sort=True):
        table = grp.pivot_table(index=x, columns="seed", values="value")
        out[key] = (table.index.to_numpy(), table.mean(axis=1).to_numpy(),
                    table.min(axis=1).to_numpy(), table.max(axis=1).to_numpy())
    return out


def band_plot(ax, df, metric: str, hue: str, *, x: str = "round", label=None, logy=False,
              palette=None, linestyle="-"):
    data = curves(df, metric, hue, x)
    colors = palette or sns.color_palette("viridis", max(len(data), 1))
    for color, (key, (xs, mean, lo, hi)) in zip(colors, data.items()):
        ax.plot(xs, mean, color=color, lw=1.6, ls=linestyle,
                label=label(key) if label else str(key))
        ax.fill_between(xs, lo, hi, color=color, alpha=0.2, lw=0)
    if logy:
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel(x)
    return ax


def save(fig, figures_dir, stem: str) -> list[Path]:
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    paths = [figures_dir / f"{stem}.png", figures_dir / f"{stem}.pdf"]
    no_minor_labels(fig)
    fig.tight_layout()
    for p in paths:
        fig.savefig(p, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return paths


def final_values(df: pd.DataFrame, metric: str, by: str, at_round=None) -> pd.Series:
    """Mean over seeds of ``metric`` at ``at_round`` (default: the last round), per ``by``."""
    sub = df[df.metric == metric]
    if at_round is None:
        at_round = sub["round"].max()
    sub = sub[sub["round"] == at_round]
    return sub.groupby(by)["value"].mean()


def no_minor_labels(fig) -> None:
    """Thin the minor tick labels of the log axes of ``fig``: none where two or more major
    (decade) ticks are in view, only the 2s and 5s where one is, all of them where none is
    (a short axis needs them to be read at all). Labelling every minor tick clutters the
    figure and overlaps the decade labels."""
    import math

    from matplotlib.ticker import NullFormatter

    def twos_and_fives(value, _pos):
        if value <= 0:
            return ""
        lead = round(value / 10 ** math.floor(math.log10(value) + 1e-9))
        return f"{value:g}" if lead in (2, 5) else ""

    for ax in fig.axes:
        for axis, lims in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            lo, hi = sorted(lims)
            if axis.get_scale() != "log" or lo <= 0:
                continue
            decades = (math.floor(math.log10(hi) + 1e-9)
                       - math.ceil(math.log10(lo) - 1e-9) + 1)   # decade ticks in view
            if decades >= 2:
                axis.set_minor_formatter(NullFormatter())
            elif decades == 1:
                axis.set_minor_formatter(FuncFormatter(twos_and_fives))

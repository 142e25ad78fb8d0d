"""One plotting style for every entry: mean over seeds with a band across seeds."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)

_FOOTERS: list = []


@contextmanager
def footer(text):
    """Every figure saved (:func:`save`) inside this block carries ``text`` as its footer
    (``reproduce.common.main`` states the scale, missing and diverged runs there): a string,
    or ``text(scope) -> str`` for a footer that depends on what the figure draws (``scope``
    is :func:`save`'s, None for a figure of the whole entry)."""
    _FOOTERS.append(text)
    try:
        yield
    finally:
        _FOOTERS.pop()


def add_footer(fig, text: str | None = None, scope=None) -> None:
    """Write ``text`` (default: the current :func:`footer`, for ``scope``) under the figure."""
    if text is None and _FOOTERS:
        text = _FOOTERS[-1](scope) if callable(_FOOTERS[-1]) else _FOOTERS[-1]
    if text:
        fig.text(0.5, -0.01, wrap_footer(text, fig.get_figwidth()), ha="center", va="top",
                 fontsize=8, color="0.25")


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
    """Mean and band over the healthy seeds per ``hue``; a replica recorded as diverged
    (``diverged_at``) is drawn thin and dotted up to the round before it diverged, marked
    with an x there, and left out of the mean and band (so it neither hides nor stretches
    the healthy curves)."""
    diverged = "diverged_at" in df and df["diverged_at"].notna().any()
    good = df[df["diverged_at"].isna()] if diverged else df
    keys = sorted(df.loc[df.metric == metric, hue].unique()) if len(df) else []
    data = curves(good, metric, hue, x)
    colors = palette or sns.color_palette("viridis", max(len(keys), 1))
    for color, key in zip(colors, keys):
        text = label(key) if label else str(key)
        if key in data:
            xs, mean, lo, hi = data[key]
            ax.plot(xs, mean, color=color, lw=1.6, ls=linestyle, label=text)
            ax.fill_between(xs, lo, hi, color=color, alpha=0.2, lw=0)
        if diverged:
            _mark_diverged(ax, df[(df[hue] == key) & (df.metric == metric)], x, color, text,
                           logy)
    if logy:
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xlabel(x)
    return ax


def _mark_diverged(ax, sub: pd.DataFrame, x: str, color, text: str, logy: bool) -> None:
    """Each diverged seed thin and dotted up to the round before it diverged, an x there;
    one legend entry for all of them (``text: seeds 0, 2 diverged at rounds 18, 26``)."""
    import numpy as np
    seeds, at, first = [], [], None
    for seed, grp in sub[sub["diverged_at"].notna()].groupby("seed"):
        grp = grp.sort_values(x)
        vals = grp["value"].to_numpy(float)
        ok = np.isfinite(vals) & ((vals > 0) if logy else True)
        ok &= grp["round"].to_numpy() < grp["diverged_at"].iloc[0]   # up to where it went
        if not ok.any():
            continue
        xs, ys = grp[x].to_numpy()[ok], vals[ok]
        ax.plot(xs, ys, color=color, lw=0.8, ls=":")
        (marker,) = ax.plot(xs[-1:], ys[-1:], "x", color=color, ms=8, mew=2,
                            label="_nolegend_")
        first = first or marker
        seeds.append(f"{seed}")
        at.append(f"{grp['diverged_at'].iloc[0]:g}")
    if first is not None:                                 # one legend entry for them all
        plural = "s" if len(seeds) > 1 else ""
        first.set_label(f"{text}: seed{plural} {', '.join(seeds)} diverged at "
                        f"round{plural} {', '.join(at)}")


def wrap_footer(text: str, width_in: float) -> str:
    """``text`` with each line wrapped to the figure's width (8-point text, about 16
    characters an inch), so a long footer does not widen a figure saved with a tight box."""
    import textwrap
    width = max(60, int(16 * width_in))
    return "\n".join(textwrap.fill(line, width) if line else line
                     for line in text.split("\n"))


def save(fig, figures_dir, stem: str, scope=None) -> list[Path]:
    """Save ``fig`` as ``STEM.png`` and ``STEM.pdf`` with the current footer; ``scope`` says
    which part of the entry the figure draws (:class:`reproduce.common.FigureScope`), so its
    footer states that part's runs and regime only."""
    figures_dir = Path(figures_dir)
    figures_dir.mkdir(parents=True, exist_ok=True)
    paths = [figures_dir / f"{stem}.png", figures_dir / f"{stem}.pdf"]
    add_footer(fig, scope=scope)
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
